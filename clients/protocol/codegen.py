"""Compiles one struct declaration at one version into a reader and a writer function.

Walking the declaration for every message (a closure call per field, a default looked up
per field, a `hasattr` per field written) was most of a broker's Python time for a Fetch
or Produce request. Here each (struct, version) becomes straight-line Python source,
compiled once with `exec` (as `dataclasses` builds `__init__`, and kafka-python compiles its
encoders at runtime):

- consecutive fixed-size fields are read with one `unpack_from` and written with one `pack`;
- nested structs and arrays of structs are inlined as loops, so a message is one call;
- a varint of one byte (every length and tag count in practice) takes an inline fast path.

The contract is the schema's (see schema.py): decoding gives a `Struct` holding every
declared field, defaults where the version lacks it; every overrun, bad length, null where
the field is not nullable or invalid UTF-8 raises DecodeError, never another error, and a
count is checked against the bytes left before anything is allocated for it. Encoding
takes dicts (a missing key means the default) or objects with attributes; a tagged field
is written only when it is neither None nor its default.
"""
from __future__ import annotations

import struct
import uuid as _uuid
from operator import itemgetter
from typing import Any, Callable, Protocol, Sequence

from .types import DecodeError, Reader, Writer, ZERO_UUID


class _Versions(Protocol):
    def __contains__(self, version: int) -> bool: ...


class FieldDecl(Protocol):
    """What the compiler reads of a field declaration (schema.F). Declared here, as a
    protocol, because the schema imports this module."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...                   # prim, prim_array, struct, struct_array
    @property
    def elem(self) -> Any: ...                   # the primitive's name, or the sub-fields
    @property
    def vr(self) -> _Versions: ...               # versions with the field
    @property
    def nr(self) -> _Versions | None: ...        # versions where it may be null
    @property
    def tr(self) -> _Versions | None: ...        # versions where it is tagged
    @property
    def tag(self) -> int | None: ...
    @property
    def default(self) -> Any: ...

    def default_value(self) -> Any: ...


ReadFn = Callable[[Reader], Any]
WriteFn = Callable[..., None]   # (writer, value, counts=None)

# Fixed-size primitives and their struct codes ("16s" for a uuid's bytes).
_FIXED = {"bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i",
          "uint32": "I", "int64": "q", "float64": "d", "uuid": "16s"}
_IMMUTABLE = (bool, int, float, str, bytes, type(None), _uuid.UUID)

_MISSING = object()
_NULL_LENGTH = {"h": struct.pack(">h", -1), "i": struct.pack(">i", -1)}


def _read_uvarint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it (the multi-byte path)."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint too long")


def _write_uvarint(buf: bytearray, v: int) -> None:
    while v >= 0x80:
        buf.append((v & 0x7F) | 0x80)
        v >>= 7
    buf.append(v)


def _short(n: int, pos: int, end: int) -> DecodeError:
    return DecodeError(f"need {n} bytes at {pos}, only {end - pos} left")


def _uuid_bytes(v: Any) -> bytes:
    if v is None:
        v = ZERO_UUID
    return v.bytes if isinstance(v, _uuid.UUID) else bytes(v)


_FIELDED: dict[tuple[type, tuple[str, ...]], type] = {}


def fielded_struct_type(base: type, names: Sequence[str]) -> type:
    """A subclass of `base` (a dict subclass with a `__getattr__` fallback) with a property
    per field name: a decoded struct's `s.name` then finds a descriptor on its type (~80 ns)
    instead of failing the normal lookup, raising and catching an AttributeError, and calling
    `__getattr__` (~650 ns); a broker reads several fields of every partition of every
    request. Names `base` already answers (dict's methods) keep its meaning. One class per
    field list, shared by every codec that declares the same fields."""
    key = (base, tuple(names))
    cls = _FIELDED.get(key)
    if cls is None:
        ns: dict[str, Any] = {"__slots__": (), "__module__": base.__module__,
                              "__qualname__": base.__qualname__}
        for name in names:
            if not name.startswith("_") and not hasattr(base, name):
                ns[name] = property(itemgetter(name), doc=f"the field {name!r}")
        cls = _FIELDED[key] = type(base.__name__, (base,), ns)
    return cls


class _Attrs:
    """`get` over an object's attributes, so objects encode like dicts."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def get(self, name: str, default: Any) -> Any:
        return getattr(self.obj, name, default)


def _role(f: FieldDecl, version: int, flexible: bool) -> str | None:
    """"plain", "tagged", or None for a field this version does not carry."""
    if version not in f.vr:
        return None
    if f.tag is not None:
        return "tagged" if flexible and f.tr is not None and version in f.tr else None
    return "plain"


class _Source:
    """Lines of one generated function and the names they refer to."""

    def __init__(self, struct_type: type):
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "_DE": DecodeError, "_short": _short, "_ruv": _read_uvarint, "_wuv": _write_uvarint,
            "_UUID": _uuid.UUID, "_uuidb": _uuid_bytes, "_Attrs": _Attrs, "_M": _MISSING,
            "_Reader": Reader, "_Writer": Writer, "_Struct": struct_type,
            "_unpack": struct.unpack_from, "_pack": struct.pack,
            "_I8": struct.Struct(">b"), "_I16": struct.Struct(">h"), "_I32": struct.Struct(">i"),
        }
        self._n = 0

    def var(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def const(self, value: Any, prefix: str = "k") -> str:
        name = self.var("_" + prefix)
        self.ns[name] = value
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def build(self, name: str, params: str, prologue: Sequence[str], epilogue: Sequence[str]) -> Any:
        body = [f"def {name}({params}):"] + ["    " + p for p in prologue] + self.lines + \
            ["    " + e for e in epilogue]
        exec(compile("\n".join(body), f"<strom codec {name}>", "exec"), self.ns)
        return self.ns[name]


def _struct_const(src: _Source, fields: Sequence[FieldDecl]) -> str:
    """The name of the decoded-struct class for `fields` in the generated code."""
    return src.const(fielded_struct_type(src.ns["_Struct"], [f.name for f in fields]), "C")


def _default_read_expr(src: _Source, f: FieldDecl) -> str:
    """An expression giving a fresh default of `f` (shared when immutable)."""
    d = f.default_value()
    if isinstance(d, _IMMUTABLE):
        return src.const(d, "d")
    if f.kind == "struct" and f.default is None:
        # A literal of the sub-fields' defaults: a Fetch v12+ partition decodes three
        # absent tagged structs, and building them through default_value() cost more
        # than reading the fields that are there.
        items = ", ".join(f"{sub.name!r}: {_default_read_expr(src, sub)}" for sub in f.elem)
        return f"{_struct_const(src, f.elem)}({{{items}}})"
    if d == [] and f.kind in ("struct_array", "prim_array"):
        return "[]"
    return src.const(f.default_value, "df") + "()"


# ---------------------------------------------------------------- reading

def _emit_uvarint(src: _Source, ind: int, target: str) -> None:
    src.emit(ind, "if pos >= end: raise _DE('truncated varint')")
    src.emit(ind, f"{target} = buf[pos]")
    src.emit(ind, f"if {target} < 128: pos += 1")
    src.emit(ind, f"else: {target}, pos = _ruv(buf, pos, end)")


def _emit_fixed(src: _Source, ind: int, code: str, target: str) -> None:
    st = struct.Struct(">" + code)
    src.emit(ind, f"if pos + {st.size} > end: raise _short({st.size}, pos, end)")
    src.emit(ind, f"{target} = {src.const(st, 'S')}.unpack_from(buf, pos)[0]")
    src.emit(ind, f"pos += {st.size}")


def _emit_length(src: _Source, ind: int, target: str, flexible: bool, code: str) -> None:
    """A length: uvarint(n + 1) when flexible, else int16 ("h") or int32 ("i")."""
    if flexible:
        _emit_uvarint(src, ind, target)
        src.emit(ind, f"{target} -= 1")
    else:
        _emit_fixed(src, ind, code, target)


def _emit_sized_prologue(src: _Source, ind: int, n: str, size: str, flexible: bool, code: str,
                         nullable: bool, null_error: str) -> None:
    """Read a string's or bytes' length into `size`: null sets `n` (or raises), otherwise
    an `else:` block is opened, bounds-checked, for the caller to read the value in."""
    _emit_length(src, ind, size, flexible, code)
    src.emit(ind, f"if {size} < 0:")
    src.emit(ind + 1, f"{n} = None" if nullable else f"raise _DE({null_error!r})")
    src.emit(ind, "else:")
    src.emit(ind + 1, f"if pos + {size} > end: raise _short({size}, pos, end)")


def _emit_read_struct(src: _Source, fields: Sequence[FieldDecl], version: int, flexible: bool,
                      ind: int, out: str) -> None:
    """Code reading the struct at `pos` into the variable `out`."""
    plain = [f for f in fields if _role(f, version, flexible) == "plain"]
    tagged = {f.tag: f for f in fields if _role(f, version, flexible) == "tagged"}
    values: dict[str, str] = {}
    i = 0
    while i < len(plain):
        run = []
        while i < len(plain) and plain[i].kind == "prim" and plain[i].elem in _FIXED:
            run.append(plain[i])
            i += 1
        if run:
            names = [src.var("v") for _ in run]
            st = struct.Struct(">" + "".join(_FIXED[f.elem] for f in run))
            src.emit(ind, f"if pos + {st.size} > end: raise _short({st.size}, pos, end)")
            src.emit(ind, f"{', '.join(names)}, = {src.const(st, 'S')}.unpack_from(buf, pos)")
            src.emit(ind, f"pos += {st.size}")
            for f, n in zip(run, names):
                if f.elem == "uuid":
                    src.emit(ind, f"{n} = _UUID(bytes={n})")
                values[f.name] = n
            continue
        f = plain[i]
        i += 1
        n = src.var("v")
        _emit_read_value(src, f, version, flexible, ind, n)
        values[f.name] = n
    items = ", ".join(f"{f.name!r}: {values[f.name] if f.name in values else _default_read_expr(src, f)}"
                      for f in fields)
    src.emit(ind, f"{out} = {_struct_const(src, fields)}({{{items}}})")
    if not flexible:
        return
    count, tag, size = src.var("nt"), src.var("tag"), src.var("sz")
    _emit_uvarint(src, ind, count)
    src.emit(ind, f"for _ in range({count}):")
    _emit_uvarint(src, ind + 1, tag)
    _emit_uvarint(src, ind + 1, size)
    src.emit(ind + 1, f"if pos + {size} > end: raise _short({size}, pos, end)")
    first = True
    for t, f in sorted(tagged.items()):
        reader = src.const(compile_value_reader(f, version, flexible, src.ns["_Struct"]), "rt")
        src.emit(ind + 1, f"{'if' if first else 'elif'} {tag} == {t}: "
                          f"{out}[{f.name!r}] = {reader}(_Reader(buf, pos, pos + {size}))")
        first = False
    # Unknown tags are skipped, as Kafka does.
    src.emit(ind + 1, f"pos += {size}")


def _emit_read_value(src: _Source, f: FieldDecl, version: int, flexible: bool, ind: int, n: str,
                     elem: str | None = None, nullable: bool | None = None) -> None:
    """Code reading one value of field `f` (or, with `elem`, one element of a primitive
    array) into the variable `n`."""
    kind = "prim" if elem is not None else f.kind
    t = elem if elem is not None else f.elem
    if nullable is None:
        nullable = f.nr is not None and version in f.nr
    if kind == "prim":
        if t in _FIXED:
            _emit_fixed(src, ind, _FIXED[t], n)
            if t == "uuid":
                src.emit(ind, f"{n} = _UUID(bytes={n})")
            elif t == "bool":
                pass   # "?" already gives a bool
            return
        size = src.var("n")
        if t == "string":
            _emit_sized_prologue(src, ind, n, size, flexible, "h", nullable, "null for a non-nullable string")
            src.emit(ind + 1, "try:")
            src.emit(ind + 2, f"{n} = str(buf[pos:pos + {size}], 'utf-8')")
            src.emit(ind + 1, "except UnicodeDecodeError as e:")
            src.emit(ind + 2, "raise _DE(f'invalid utf-8 string: {e}') from None")
            src.emit(ind + 1, f"pos += {size}")
            return
        assert t in ("bytes", "records"), t
        _emit_sized_prologue(src, ind, n, size, flexible, "i", nullable, "null for non-nullable bytes")
        # Records stay a view of the frame: record batches are never copied here.
        view = f"buf[pos:pos + {size}]"
        src.emit(ind + 1, f"{n} = {view if t == 'records' else f'bytes({view})'}")
        src.emit(ind + 1, f"pos += {size}")
        return
    if kind == "struct":
        if nullable:
            flag = src.var("p")
            _emit_fixed(src, ind, "b", flag)
            src.emit(ind, f"if {flag} < 0:")
            src.emit(ind + 1, f"{n} = None")
            src.emit(ind, "else:")
            _emit_read_struct(src, f.elem, version, flexible, ind + 1, n)
        else:
            _emit_read_struct(src, f.elem, version, flexible, ind, n)
        return
    count = src.var("n")
    _emit_length(src, ind, count, flexible, "i")
    # Every element takes at least one byte: a larger count is a lie that must not make
    # us allocate or loop for billions of elements.
    src.emit(ind, f"if {count} > end - pos: "
                  f"raise _DE(f'array count {{{count}}} exceeds the {{end - pos}} bytes left')")
    src.emit(ind, f"if {count} < 0:")
    if nullable:
        src.emit(ind + 1, f"{n} = None")
    else:
        src.emit(ind + 1, f"raise _DE({('null array ' + repr(f.name) + ' is not nullable')!r})")
    src.emit(ind, "else:")
    if kind == "prim_array" and f.elem in _FIXED and f.elem != "uuid":
        code = _FIXED[f.elem]
        width = struct.calcsize(">" + code)
        src.emit(ind + 1, f"if pos + {width} * {count} > end: "
                          f"raise _short({width} * {count}, pos, end)")
        src.emit(ind + 1, f"{n} = list(_unpack('>' + str({count}) + {code!r}, buf, pos))")
        src.emit(ind + 1, f"pos += {width} * {count}")
        return
    item = src.var("e")
    src.emit(ind + 1, f"{n} = []")
    src.emit(ind + 1, f"for _ in range({count}):")
    if kind == "prim_array":
        _emit_read_value(src, f, version, flexible, ind + 2, item, elem=f.elem, nullable=False)
    else:
        _emit_read_struct(src, f.elem, version, flexible, ind + 2, item)
    src.emit(ind + 2, f"{n}.append({item})")


_READ_PROLOGUE = ("buf = r.buf", "pos = r.pos", "end = r.end")


def compile_struct_reader(fields: Sequence[FieldDecl], version: int, flexible: bool,
                          struct_type: type) -> ReadFn:
    """`read(reader) -> Struct` for the fields at `version`."""
    src = _Source(struct_type)
    _emit_read_struct(src, fields, version, flexible, 1, "out")
    return src.build("read_struct", "r", _READ_PROLOGUE, ("r.pos = pos", "return out"))


def compile_value_reader(f: FieldDecl, version: int, flexible: bool, struct_type: type) -> ReadFn:
    """`read(reader) -> value` of one field (a tagged field's own bytes)."""
    src = _Source(struct_type)
    _emit_read_value(src, f, version, flexible, 1, "out")
    return src.build("read_value", "r", _READ_PROLOGUE, ("r.pos = pos", "return out"))


# ---------------------------------------------------------------- writing

def _emit_write_uvarint(src: _Source, ind: int, expr: str) -> None:
    u = src.var("u")
    src.emit(ind, f"{u} = {expr}")
    src.emit(ind, f"if {u} < 128: buf.append({u})")
    src.emit(ind, f"else: _wuv(buf, {u})")


def _emit_write_length(src: _Source, ind: int, expr: str, flexible: bool, code: str) -> None:
    if flexible:
        _emit_write_uvarint(src, ind, f"{expr} + 1")
    else:
        src.emit(ind, f"buf += {'_I16' if code == 'h' else '_I32'}.pack({expr})")


def _emit_null_length(src: _Source, ind: int, flexible: bool, code: str) -> None:
    if flexible:
        src.emit(ind, "buf.append(0)")
    else:
        src.emit(ind, f"buf += {_NULL_LENGTH[code]!r}")


def _value_expr(src: _Source, ind: int, getter: str, f: FieldDecl) -> str:
    """An expression (or a variable set by emitted code) holding the value to write."""
    d = f.default_value()
    if isinstance(d, _IMMUTABLE):
        return f"{getter}({f.name!r}, {src.const(d, 'd')})"
    if f.kind in ("struct_array", "prim_array") and d == []:
        return f"{getter}({f.name!r}, ())"          # writes as the empty default does
    if f.kind == "struct" and f.default is None:
        return f"{getter}({f.name!r}, {src.const({}, 'empty')})"   # every field's default
    v = src.var("v")
    src.emit(ind, f"{v} = {getter}({f.name!r}, _M)")
    src.emit(ind, f"if {v} is _M: {v} = {src.const(f.default_value, 'df')}()")
    return v


def _emit_write_struct(src: _Source, fields: Sequence[FieldDecl], version: int, flexible: bool,
                       ind: int, obj: str) -> None:
    """Code writing the struct held by the variable `obj`."""
    getter = src.var("g")
    src.emit(ind, f"{getter} = ({obj} if isinstance({obj}, dict) else _Attrs({obj})).get")
    plain = [f for f in fields if _role(f, version, flexible) == "plain"]
    i = 0
    while i < len(plain):
        run = []
        while i < len(plain) and plain[i].kind == "prim" and plain[i].elem in _FIXED \
                and plain[i].elem != "uuid":
            run.append(plain[i])
            i += 1
        if run:
            st = struct.Struct(">" + "".join(_FIXED[f.elem] for f in run))
            args = []
            for f in run:
                expr = _value_expr(src, ind, getter, f)
                if f.name == "error_code":
                    # Counted as written: the broker's ErrorsPerSec without a second walk.
                    code = src.var("ec")
                    src.emit(ind, f"{code} = {expr}")
                    src.emit(ind, f"if counts is not None: counts[{code}] = counts.get({code}, 0) + 1")
                    expr = code
                args.append(expr)
            src.emit(ind, f"buf += {src.const(st, 'S')}.pack({', '.join(args)})")
            continue
        f = plain[i]
        i += 1
        v = src.var("v")
        src.emit(ind, f"{v} = {_value_expr(src, ind, getter, f)}")
        _emit_write_value(src, f, version, flexible, ind, v)
    if not flexible:
        return
    tagged = sorted((f.tag, f) for f in fields if _role(f, version, flexible) == "tagged")
    if not tagged:
        src.emit(ind, "buf.append(0)")
        return
    present = src.var("t")
    src.emit(ind, f"{present} = []")
    for t, f in tagged:
        v = src.var("v")
        writer = src.const(compile_value_writer(f, version, flexible), "wt")
        src.emit(ind, f"{v} = {getter}({f.name!r}, None)")
        # The default is only compared with, never handed out: one copy for every write.
        src.emit(ind, f"if {v} is not None and {v} != {src.const(f.default_value(), 'dv')}: "
                      f"{present}.append(({t}, {writer}, {v}))")
    _emit_write_uvarint(src, ind, f"len({present})")
    tag, fn, v, sub, data = (src.var(p) for p in ("tag", "fn", "v", "w", "data"))
    src.emit(ind, f"for {tag}, {fn}, {v} in {present}:")
    src.emit(ind + 1, f"{sub} = _Writer()")
    src.emit(ind + 1, f"{fn}({sub}, {v}, counts)")
    src.emit(ind + 1, f"{data} = {sub}.getvalue()")
    _emit_write_uvarint(src, ind + 1, tag)
    _emit_write_uvarint(src, ind + 1, f"len({data})")
    src.emit(ind + 1, f"buf += {data}")


def _emit_write_value(src: _Source, f: FieldDecl, version: int, flexible: bool, ind: int, v: str,
                      elem: str | None = None) -> None:
    """Code writing the value held by `v` (a field's, or a primitive array element's)."""
    kind = "prim" if elem is not None else f.kind
    t = elem if elem is not None else f.elem
    if kind == "prim":
        if t == "uuid":
            src.emit(ind, f"buf += _uuidb({v})")
        elif t in _FIXED:
            src.emit(ind, f"buf += {src.const(struct.Struct('>' + _FIXED[t]), 'S')}.pack({v})")
        elif t == "string":
            data = src.var("s")
            src.emit(ind, f"if {v} is None:")
            _emit_null_length(src, ind + 1, flexible, "h")
            src.emit(ind, "else:")
            src.emit(ind + 1, f"{data} = {v}.encode('utf-8')")
            _emit_write_length(src, ind + 1, f"len({data})", flexible, "h")
            src.emit(ind + 1, f"buf += {data}")
        else:
            src.emit(ind, f"if {v} is None:")
            _emit_null_length(src, ind + 1, flexible, "i")
            src.emit(ind, f"elif isinstance({v}, (bytes, bytearray, memoryview)):")
            _emit_write_length(src, ind + 1, f"len({v})", flexible, "i")
            src.emit(ind + 1, f"buf += {v}")
            src.emit(ind, "else:")
            # File regions (DeferredBytes) or a list of parts: the Writer starts a new
            # chunk around them, so pick up its new buffer.
            src.emit(ind + 1, f"w.bytes_({v}, {flexible})")
            src.emit(ind + 1, "buf = w._buf")
        return
    if kind == "struct":
        if f.nr is not None and version in f.nr:
            src.emit(ind, f"if {v} is None:")
            src.emit(ind + 1, "buf.append(255)")
            src.emit(ind, "else:")
            src.emit(ind + 1, "buf.append(1)")
            _emit_write_struct(src, f.elem, version, flexible, ind + 1, v)
        else:
            # A non-nullable struct given as None is written with its defaults.
            src.emit(ind, f"if {v} is None: {v} = {src.const({}, 'empty')}")
            _emit_write_struct(src, f.elem, version, flexible, ind, v)
        return
    src.emit(ind, f"if {v} is None:")
    _emit_null_length(src, ind + 1, flexible, "i")
    src.emit(ind, "else:")
    _emit_write_length(src, ind + 1, f"len({v})", flexible, "i")
    if kind == "prim_array" and f.elem in _FIXED and f.elem != "uuid":
        src.emit(ind + 1, f"buf += _pack('>' + str(len({v})) + {_FIXED[f.elem]!r}, *{v})")
        return
    item = src.var("e")
    src.emit(ind + 1, f"for {item} in {v}:")
    if kind == "prim_array":
        _emit_write_value(src, f, version, flexible, ind + 2, item, elem=f.elem)
    else:
        _emit_write_struct(src, f.elem, version, flexible, ind + 2, item)


def compile_struct_writer(fields: Sequence[FieldDecl], version: int, flexible: bool) -> WriteFn:
    """`write(writer, obj, counts=None)` for the fields at `version`; `counts`, a dict,
    counts each value written to a field named error_code."""
    src = _Source(dict)
    _emit_write_struct(src, fields, version, flexible, 1, "obj")
    return src.build("write_struct", "w, obj, counts=None", ("buf = w._buf",), ())


def compile_value_writer(f: FieldDecl, version: int, flexible: bool) -> WriteFn:
    """`write(writer, value, counts=None)` of one field (a tagged field's own bytes)."""
    src = _Source(dict)
    _emit_write_value(src, f, version, flexible, 1, "value")
    return src.build("write_value", "w, value, counts=None", ("buf = w._buf",), ())
