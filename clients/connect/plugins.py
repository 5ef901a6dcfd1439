"""The plugin registry: which connector, converter, transformation and predicate classes a
worker knows, and Kafka Connect's rules for naming them.

Three sources, registered in this order (the first registration of a full name wins):
- strom's built-ins, named by Kafka's full class names and imported only when first used
  (the table maps each name to a "module:Class" string);
- the entry points of the group `strom.connect.plugins` of installed distributions, each
  naming a class;
- the directories of `plugin.path`: every `.py` file and package directory there is imported
  in a fresh module namespace (`strom_connect_plugins.<dir hash>.<name>`, so two directories
  may each hold a `my_connector.py`), and every concrete plugin class defined in it is
  registered as `<name>.<ClassName>`. A file that fails to import is logged and skipped.

A class may declare `KAFKA_NAME` (its Java-style full name); otherwise its full name is its
module's name and qualified class name. Names accepted by a lookup, as Kafka's: the full
name; the simple class name (after the last "." and "$"); the simple name without the
kind's suffix ("Connector", "Converter", "HeaderConverter", "Transformation", "Predicate").
An alias that would name two different classes names neither.

Concurrency: construction scans everything; afterwards the registry is read-only apart from
the cache of loaded built-in classes, so lookups are safe from any thread.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import pkgutil
import re
import sys
import types
from dataclasses import dataclass
from typing import Any, Iterable

from .api import ConnectError, Connector, SinkConnector, SourceConnector

__all__ = ["PluginRegistry", "PluginNotFoundError", "PluginDesc", "KINDS", "BUILTINS",
           "ENTRY_POINT_GROUP"]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "strom.connect.plugins"
PLUGIN_NAMESPACE = "strom_connect_plugins"

KINDS = ("connector", "converter", "header_converter", "transformation", "predicate")
# a kind is what a lookup asks for; a type is what `GET /connector-plugins` shows
_TYPES_OF_KIND = {"connector": ("source", "sink"), "converter": ("converter",),
                  "header_converter": ("header_converter",),
                  "transformation": ("transformation",), "predicate": ("predicate",)}
_ALL_TYPES = ("source", "sink", "converter", "header_converter", "transformation", "predicate")
# Kafka's words in "Failed to find any class that implements <X> ..., available <y> are:"
_INTERFACE = {"connector": ("Connector", "connectors"), "converter": ("Converter", "converters"),
              "header_converter": ("HeaderConverter", "header converters"),
              "transformation": ("Transformation", "transformations"),
              "predicate": ("Predicate", "predicates")}
_SUFFIX = {"source": "Connector", "sink": "Connector", "converter": "Converter",
           "header_converter": "HeaderConverter", "transformation": "Transformation",
           "predicate": "Predicate"}

_CONVERTERS = "clients.connect.converters"
_TRANSFORMS = "clients.connect.transforms"
_K = "org.apache.kafka.connect"


def _smt(name: str, module: str, cls: str, type_: str = "transformation") -> tuple[str, str, str]:
    return f"{_K}.transforms.{name}", type_, f"{_TRANSFORMS}.{module}:{cls}"


# (Kafka's full name, type, "module:Class"). Kafka's String/ByteArray/Json converters are
# header converters too. Cast is mapped ahead of its class: until it exists, its lookup fails
# saying so.
BUILTINS: tuple[tuple[str, str, str], ...] = (
    (f"{_K}.file.FileStreamSourceConnector", "source",
     "clients.connect.connectors.file_source:FileStreamSourceConnector"),
    (f"{_K}.file.FileStreamSinkConnector", "sink",
     "clients.connect.connectors.file_sink:FileStreamSinkConnector"),
    ("io.strom.connect.syslog.SyslogSourceConnector", "source",
     "clients.connect.connectors.syslog_source:SyslogSourceConnector"),
    (f"{_K}.storage.StringConverter", "converter", f"{_CONVERTERS}:StringConverter"),
    (f"{_K}.converters.ByteArrayConverter", "converter", f"{_CONVERTERS}:ByteArrayConverter"),
    (f"{_K}.json.JsonConverter", "converter", f"{_CONVERTERS}:JsonConverter"),
    (f"{_K}.storage.StringConverter", "header_converter", f"{_CONVERTERS}:StringConverter"),
    (f"{_K}.converters.ByteArrayConverter", "header_converter",
     f"{_CONVERTERS}:ByteArrayConverter"),
    (f"{_K}.json.JsonConverter", "header_converter", f"{_CONVERTERS}:JsonConverter"),
    (f"{_K}.storage.SimpleHeaderConverter", "header_converter",
     f"{_CONVERTERS}:SimpleHeaderConverter"),
    # X$Key / X$Value are the classes XKey / XValue of the transform's module
    *(_smt(f"{smt}${part}", module, f"{smt}{part}")
      for smt, module in (("InsertField", "insert_field"), ("ReplaceField", "replace_field"),
                          ("HoistField", "hoist_field"), ("ExtractField", "extract_field"),
                          ("MaskField", "mask_field"), ("Cast", "cast"))
      for part in ("Key", "Value")),
    _smt("RegexRouter", "regex_router", "RegexRouter"),
    _smt("Filter", "filter", "Filter"),
    _smt("TimestampRouter", "timestamp_router", "TimestampRouter"),
    _smt("ValueToKey", "value_to_key", "ValueToKey"),
    _smt("predicates.TopicNameMatches", "predicates", "TopicNameMatches", "predicate"),
    _smt("predicates.HasHeaderKey", "predicates", "HasHeaderKey", "predicate"),
    _smt("predicates.RecordIsTombstone", "predicates", "RecordIsTombstone", "predicate"),
)


class PluginNotFoundError(ConnectError):
    """No plugin of this kind has this name (or a built-in could not be imported). `message`
    and `status` (404) match clients.connect.errors.NotFoundError's, so a REST layer may
    answer it alike."""

    status = 404

    def __init__(self, message: str, name: str, kind: str):
        super().__init__(message)
        self.message = message
        self.name = name
        self.kind = kind


@dataclass
class PluginDesc:
    """One registered plugin: its full name, its type ("source", "sink", "converter",
    "header_converter", "transformation", "predicate"), where it came from ("builtin", an
    entry point, a file), and the class (a built-in's is loaded from `target` on first use)."""

    class_name: str
    plugin_type: str
    location: str
    target: str | None = None
    cls: type | None = None


def simple_name(full_name: str) -> str:
    """Java's getSimpleName of a full name: after the last "." and the last "$"."""
    return full_name.rsplit(".", 1)[-1].rsplit("$", 1)[-1]


def pruned_name(full_name: str, type_: str) -> str:
    """The simple name without its type's suffix (unchanged when nothing precedes it)."""
    simple = simple_name(full_name)
    pos = simple.rfind(_SUFFIX[type_])
    return simple[:pos] if pos > 0 else simple


def plugin_types(cls: Any) -> list[str]:
    """Which plugin types a class is, by base class (connectors) or by the methods the
    worker calls (converters, transformations, predicates); [] when none or abstract."""
    if not isinstance(cls, type) or inspect.isabstract(cls):
        return []
    if issubclass(cls, Connector):
        if issubclass(cls, SourceConnector):
            return ["source"]
        if issubclass(cls, SinkConnector):
            return ["sink"]
        return []
    found = []
    if _has(cls, "from_connect_data", "to_connect_data"):
        found.append("converter")
    if _has(cls, "from_connect_header", "to_connect_header"):
        found.append("header_converter")
    if _has(cls, "apply", "configure"):
        found.append("transformation")
    if _has(cls, "test", "configure"):
        found.append("predicate")
    return found


def _has(cls: type, *methods: str) -> bool:
    return all(callable(getattr(cls, m, None)) for m in methods)


def full_name_of(cls: type, module_name: str | None = None) -> str:
    """The class's own KAFKA_NAME (not an inherited one), else `<module>.<qualified name>`."""
    declared = cls.__dict__.get("KAFKA_NAME")
    if isinstance(declared, str) and declared:
        return declared
    return f"{module_name or cls.__module__}.{cls.__qualname__}"


class PluginRegistry:
    """The worker's plugins: built-ins, entry points, and `plugin_path` directories (each a
    directory of plugins, or one plugin file). Lookups raise PluginNotFoundError."""

    def __init__(self, plugin_path: Iterable[str] = (), *, entry_points: bool = True):
        self._by_type: dict[str, dict[str, PluginDesc]] = {t: {} for t in _ALL_TYPES}
        self._unloadable: set[str] = set()
        for full, type_, target in BUILTINS:
            self._add(PluginDesc(full, type_, "builtin", target=target))
        if entry_points:
            self._scan_entry_points()
        for entry in plugin_path:
            if entry.strip():
                self._scan_path(entry.strip())
        self._aliases = self._compute_aliases()

    # ------------------------------------------------------------------ lookups

    def connector_class(self, name: str) -> type[Connector]:
        return self.resolve(name, "connector")

    def converter_class(self, name: str) -> type[Any]:
        return self.resolve(name, "converter")

    def header_converter_class(self, name: str) -> type[Any]:
        return self.resolve(name, "header_converter")

    def transformation_class(self, name: str) -> type[Any]:
        return self.resolve(name, "transformation")

    def predicate_class(self, name: str) -> type[Any]:
        return self.resolve(name, "predicate")

    def resolve(self, name: str, kind: str) -> Any:
        """The class of this kind named `name` (full name or alias)."""
        return self._load(self.describe(name, kind), kind)

    def describe(self, name: str, kind: str) -> PluginDesc:
        """The PluginDesc `name` names, without loading its class."""
        if kind not in _TYPES_OF_KIND:
            raise ValueError(f"unknown plugin kind {kind!r}; one of {', '.join(KINDS)}")
        name = name.strip()
        full = self._aliases.get(name, name)
        for candidate in (name, full):
            for type_ in _TYPES_OF_KIND[kind]:
                desc = self._by_type[type_].get(candidate)
                if desc is not None:
                    return desc
        interface, plural = _INTERFACE[kind]
        available = ", ".join(sorted({d.class_name for t in _TYPES_OF_KIND[kind]
                                      for d in self._by_type[t].values()}))
        raise PluginNotFoundError(
            f"Failed to find any class that implements {interface} and which name matches "
            f"{name}, available {plural} are: {available}", name, kind)

    def aliases(self) -> dict[str, str]:
        """Every unambiguous alias and the full name it stands for."""
        return dict(self._aliases)

    def plugins(self, kind: str | None = None) -> list[dict[str, str]]:
        """`GET /connector-plugins`'s entries, sorted by class: `kind` is a lookup kind
        ("connector" lists sources and sinks), a type ("source", ...), or None for all.
        A built-in that cannot be imported is logged and left out."""
        if kind is None:
            wanted: tuple[str, ...] = _ALL_TYPES
        elif kind in _TYPES_OF_KIND:
            wanted = _TYPES_OF_KIND[kind]
        elif kind in _ALL_TYPES:
            wanted = (kind,)
        else:
            raise ValueError(f"unknown plugin kind {kind!r}")
        out = []
        for type_ in wanted:
            for desc in self._by_type[type_].values():
                try:
                    cls = self._load(desc, type_)
                except PluginNotFoundError as e:
                    if desc.class_name not in self._unloadable:     # say it once
                        self._unloadable.add(desc.class_name)
                        log.warning("Leaving plugin %s out of the list: %s", desc.class_name, e)
                    continue
                out.append({"class": desc.class_name, "type": type_,
                            "version": _version_of(cls, type_)})
        out.sort(key=lambda p: (p["class"], p["type"]))
        return out

    # ------------------------------------------------------------------ registration

    def _add(self, desc: PluginDesc) -> None:
        existing = self._by_type[desc.plugin_type].get(desc.class_name)
        if existing is not None:
            log.warning("Plugin %s (%s) from %s is already registered from %s; ignoring it",
                        desc.class_name, desc.plugin_type, desc.location, existing.location)
            return
        self._by_type[desc.plugin_type][desc.class_name] = desc

    def _add_class(self, cls: type, full: str, location: str) -> int:
        found = plugin_types(cls)
        for type_ in found:
            self._add(PluginDesc(full, type_, location, cls=cls))
        return len(found)

    def _scan_entry_points(self) -> None:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            where = f"entry point {ep.name} = {ep.value}"
            try:
                obj = ep.load()
            except Exception:
                log.exception("Failed to load the plugin of %s; skipping it", where)
                continue
            if not self._add_class(obj, full_name_of(obj), where):
                log.warning("The %s is not a connector, converter, transformation or predicate "
                            "class; skipping it", where)

    def _scan_path(self, entry: str) -> None:
        path = os.path.abspath(entry)
        if os.path.isfile(path) and path.endswith(".py"):
            self._load_path_module(os.path.dirname(path), os.path.basename(path))
        elif os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                self._load_path_module(path, name)
        else:
            log.error("Could not get listing for plugin path: %s (no such directory or .py file)",
                      path)

    def _load_path_module(self, directory: str, name: str) -> None:
        """Import one .py file or package directory of a plugin.path directory and register
        the plugin classes it defines."""
        full_path = os.path.join(directory, name)
        if name.startswith(".") or name.startswith("__"):
            return
        if os.path.isfile(full_path) and name.endswith(".py"):
            stem, init, search = name[:-3], full_path, None
        elif os.path.isfile(os.path.join(full_path, "__init__.py")):
            stem, init, search = name, os.path.join(full_path, "__init__.py"), [full_path]
        else:
            return
        digest = hashlib.sha1(directory.encode()).hexdigest()[:12]
        prefix = f"{PLUGIN_NAMESPACE}.d{digest}"
        _ensure_namespace(PLUGIN_NAMESPACE)
        _ensure_namespace(prefix)
        module_name = f"{prefix}.{_identifier(stem)}"
        module = _exec_module(module_name, init, search)
        if module is None:
            return
        modules = [module]
        if search is not None:
            modules += _import_submodules(module)
        count = 0
        for mod in modules:
            shown = mod.__name__[len(prefix) + 1:]     # the name without the namespace
            for _, cls in inspect.getmembers(mod, inspect.isclass):
                if cls.__module__ == mod.__name__:
                    count += self._add_class(cls, full_name_of(cls, shown), full_path)
        log.info("Loaded %d plugin(s) from %s", count, full_path)

    def _compute_aliases(self) -> dict[str, str]:
        # Kafka's computeAliases: every simple and pruned name of every plugin, kept only
        # when it points at one class across all types.
        claims: dict[str, set[str]] = {}
        for type_, descs in self._by_type.items():
            for full in descs:
                claims.setdefault(simple_name(full), set()).add(full)
                claims.setdefault(pruned_name(full, type_), set()).add(full)
        aliases = {}
        for alias, names in claims.items():
            if len(names) == 1:
                aliases[alias] = next(iter(names))
            else:
                log.debug("Ignoring ambiguous alias %r since it refers to multiple distinct "
                          "plugins %s", alias, sorted(names))
        return aliases

    # ------------------------------------------------------------------ loading

    def _load(self, desc: PluginDesc, kind: str) -> Any:
        if desc.cls is not None:
            return desc.cls
        assert desc.target is not None
        module_name, _, attr = desc.target.partition(":")
        try:
            module = importlib.import_module(module_name)
            cls: Any = functools.reduce(getattr, attr.split("."), module)
        except (ImportError, AttributeError) as e:
            raise PluginNotFoundError(
                f"Plugin {desc.class_name} is built into strom as {desc.target}, which could "
                f"not be loaded: {e}", desc.class_name, kind) from e
        desc.cls = cls
        return cls


def _version_of(cls: type, type_: str) -> str:
    """Connector.version() for connectors; strom's version for the other plugins unless the
    class declares its own version(); "undefined" (Kafka's word) when that fails."""
    from clients.aio import STROM_VERSION
    if type_ not in ("source", "sink") and "version" not in _own_attributes(cls):
        return STROM_VERSION
    try:
        return str(cls().version())
    except Exception:
        log.warning("Could not get the version of plugin %s", cls, exc_info=True)
        return "undefined"


def _own_attributes(cls: type) -> set[str]:
    # version() inherited from a built-in base is strom's anyway
    return {name for klass in cls.__mro__ if not klass.__module__.startswith("clients.")
            for name in vars(klass)}


def _identifier(name: str) -> str:
    text = re.sub(r"\W", "_", name)
    return text if text and not text[0].isdigit() else "_" + text


def _ensure_namespace(name: str) -> None:
    # parent packages of the plugin modules, so relative imports inside a plugin package work
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = []
        sys.modules[name] = package


def _exec_module(module_name: str, init: str, search: list[str] | None) -> types.ModuleType | None:
    spec = importlib.util.spec_from_file_location(module_name, init,
                                                  submodule_search_locations=search)
    if spec is None or spec.loader is None:
        log.error("Failed to load plugin %s: not an importable Python file", init)
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit):
        sys.modules.pop(module_name, None)
        log.exception("Failed to load plugin %s; skipping it", init)
        return None
    return module


def _import_submodules(package: types.ModuleType) -> list[types.ModuleType]:
    found = []

    def failed(name: str) -> None:
        log.exception("Failed to load plugin module %s of %s; skipping it", name, package.__file__)

    for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".", onerror=failed):
        try:
            found.append(importlib.import_module(info.name))
        except (Exception, SystemExit):
            log.exception("Failed to load plugin module %s (in %s); skipping it", info.name,
                          os.path.dirname(package.__file__ or "?"))
    return found
