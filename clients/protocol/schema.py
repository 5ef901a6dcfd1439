"""Kafka messages declared as data, with encoders/decoders derived from the declaration.

A declaration mirrors the shape of Kafka's message specs: an `Api` has a key, valid versions
and the first flexible version; its request and response are lists of `F` fields, each with
the versions it exists in, the versions in which it is nullable, a default, and for tagged
fields a tag. `F("topics", [F(...), ...])` is an array of structs; `F("ids", "[]int32")` an
array of primitives.

Decoded messages are `Struct`s: dicts with attribute access holding every field of the
struct (defaults for fields absent in the version). Encoders take a Struct or any plain dict
(missing keys mean "default"). Codecs are compiled once per (struct, version) and cached.

`F("leader", (F(...), ...))` (a tuple) is a single nested struct, decoded as a Struct whose
default holds its fields' defaults; when nullable it is preceded by an int8 presence byte
(-1 null, 1 present), as Kafka encodes nullable structs.
"""
from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass, field as dc_field
from typing import Any, Callable, Sequence

from .codegen import compile_struct_reader, compile_struct_writer
from .types import DecodeError, Reader, Writer, ZERO_UUID


class Struct(dict):
    """A decoded message or sub-struct: a dict whose keys are also attributes."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __reduce__(self) -> tuple[type, tuple[dict]]:
        # Decoded structs are of per-declaration subclasses made at run time (codegen's
        # fielded_struct_type), which pickle cannot name: they pickle as a plain Struct.
        return Struct, (dict(self),)


@dataclass(frozen=True)
class VersionRange:
    low: int
    high: int | None  # None: open ended

    @classmethod
    def parse(cls, spec: str | None) -> "VersionRange | None":
        """Kafka's notation: "none", "3+", "0-2", "5"."""
        if spec is None or spec == "none":
            return None
        if spec.endswith("+"):
            return cls(int(spec[:-1]), None)
        if "-" in spec:
            lo, hi = spec.split("-")
            return cls(int(lo), int(hi))
        return cls(int(spec), int(spec))

    def __contains__(self, v: int) -> bool:
        return v >= self.low and (self.high is None or v <= self.high)


class _Null:
    """Sentinel for `default=NULL`: the field's default is null (Kafka's "default": "null")."""

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()

PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
              "string", "bytes", "records", "uuid"}


@dataclass
class F:
    """One field. `type` is a primitive name, "[]<primitive>", a list of sub-fields (an
    array of structs) or a tuple of sub-fields (one nested struct)."""

    name: str
    type: Any
    versions: str = "0+"
    nullable: str | None = None
    default: Any = None
    tag: int | None = None
    tagged_versions: str | None = None
    about: str = ""

    def __post_init__(self) -> None:
        vr = VersionRange.parse(self.versions)
        assert vr is not None, f"{self.name}: a field needs versions"
        self.vr: VersionRange = vr
        self.nr: VersionRange | None = VersionRange.parse(self.nullable)
        self.tr: VersionRange | None = VersionRange.parse(
            self.tagged_versions or (self.versions if self.tag is not None else None))
        self.kind: str
        self.elem: Any
        if isinstance(self.type, list):
            self.kind, self.elem = "struct_array", self.type
        elif isinstance(self.type, tuple):
            self.kind, self.elem = "struct", list(self.type)
        elif isinstance(self.type, str) and self.type.startswith("[]"):
            self.kind, self.elem = "prim_array", self.type[2:]
            assert self.elem in PRIMITIVES, self.type
        else:
            assert self.type in PRIMITIVES, f"{self.name}: unknown type {self.type!r}"
            self.kind, self.elem = "prim", self.type

    def default_value(self) -> Any:
        if self.default is NULL:
            return None
        if self.default is not None:
            return self.default
        if self.kind == "struct":
            return _defaults(self.elem, None)
        if self.kind != "prim":
            return []
        t = self.elem
        if t == "bool":
            return False
        if t in ("string",):
            return ""
        if t == "bytes":
            return b""
        if t == "records":
            return None
        if t == "uuid":
            return ZERO_UUID
        if t == "float64":
            return 0.0
        return 0


# ---------------------------------------------------------------- struct codecs

class StructCodec:
    """Encoder/decoder of one struct (field list) at one version, compiled once from the
    declaration into straight-line functions (see codegen)."""

    __slots__ = ("version", "flexible", "read", "write")

    def __init__(self, fields: Sequence[F], version: int, flexible: bool):
        self.version = version
        self.flexible = flexible
        self.read: Callable[[Reader], Struct] = compile_struct_reader(fields, version, flexible, Struct)
        # write(writer, obj, counts=None): `counts` (a dict) tallies the error_code values.
        self.write: Callable[..., None] = compile_struct_writer(fields, version, flexible)


class VersionedCodecs:
    """The records of an internal topic (`__consumer_offsets`, `__transaction_state`): an
    int16 version, then the struct of that kind at that version. `kinds` maps a kind to its
    fields and its first flexible version (None: never flexible); codecs compile once."""

    def __init__(self, kinds: dict[str, tuple[Sequence[F], int | None]]):
        self.kinds = kinds
        self._codecs: dict[tuple[str, int], StructCodec] = {}

    def codec(self, kind: str, version: int) -> StructCodec:
        c = self._codecs.get((kind, version))
        if c is None:
            fields, flexible_from = self.kinds[kind]
            flexible = flexible_from is not None and version >= flexible_from
            c = self._codecs[(kind, version)] = StructCodec(fields, version, flexible)
        return c

    def encode(self, kind: str, version: int, body: Any) -> bytes:
        w = Writer()
        w.int16(version)
        self.codec(kind, version).write(w, body)
        return w.getvalue()


# ---------------------------------------------------------------- APIs

@dataclass
class Api:
    """One Kafka API: key, valid versions, first flexible version, request/response fields.

    `request_header_v0` lists request versions that use request header v0 (no client id),
    which only ControlledShutdown v0 does.
    """

    key: int
    name: str
    valid: tuple[int, int]
    flexible: int | None
    request: list[F]
    response: list[F]
    request_header_v0: tuple[int, ...] = ()
    _cache: dict = dc_field(default_factory=dict, repr=False)

    @property
    def min_version(self) -> int:
        return self.valid[0]

    @property
    def max_version(self) -> int:
        return self.valid[1]

    def supports(self, version: int) -> bool:
        return self.valid[0] <= version <= self.valid[1]

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version >= self.flexible

    def request_header_version(self, version: int) -> int:
        if version in self.request_header_v0:
            return 0
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions answers with header v0 always, so a client can read it before it
        # knows which versions the broker speaks.
        if self.key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0

    def _codec(self, which: str, version: int) -> StructCodec:
        key = (which, version)
        codec = self._cache.get(key)
        if codec is None:
            if not self.supports(version):
                raise UnsupportedVersion(self.name, version)
            fields = self.request if which == "req" else self.response
            codec = StructCodec(fields, version, self.is_flexible(version))
            self._cache[key] = codec
        return codec

    def request_codec(self, version: int) -> StructCodec:
        """The request body's compiled reader and writer at `version` (UnsupportedVersion
        for a version not declared)."""
        return self._codec("req", version)

    def response_codec(self, version: int) -> StructCodec:
        return self._codec("resp", version)

    def decode_request(self, data: Any, version: int) -> Struct:
        return self._codec("req", version).read(data if isinstance(data, Reader) else Reader(data))

    def decode_response(self, data: Any, version: int) -> Struct:
        return self._codec("resp", version).read(data if isinstance(data, Reader) else Reader(data))

    def encode_request(self, msg: Any, version: int, w: Writer | None = None) -> Writer:
        w = Writer() if w is None else w
        self._codec("req", version).write(w, msg)
        return w

    def encode_response(self, msg: Any, version: int, w: Writer | None = None,
                        error_counts: dict[int, int] | None = None) -> Writer:
        """Encode a response; `error_counts`, if given, counts every error_code written."""
        w = Writer() if w is None else w
        self._codec("resp", version).write(w, msg, error_counts)
        return w

    def default_request(self, version: int) -> Struct:
        return _defaults(self.request, version)

    def default_response(self, version: int) -> Struct:
        return _defaults(self.response, version)


def _defaults(fields: Sequence[F], version: int | None) -> Struct:
    return Struct({f.name: f.default_value() for f in fields})


class UnsupportedVersion(Exception):
    def __init__(self, api: str, version: int):
        super().__init__(f"{api} v{version} is not supported")
        self.api = api
        self.version = version


__all__ = ["Api", "F", "NULL", "Struct", "VersionRange", "UnsupportedVersion", "DecodeError", "_uuid"]
