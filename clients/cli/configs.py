"""kafka-configs: describe and alter topic and broker configs (IncrementalAlterConfigs),
users' SCRAM credentials (Describe/AlterUserScramCredentials) and client quotas of users and
client ids (Describe/AlterClientQuotas).

    kafka-configs --bootstrap-server H:P --entity-type topics --entity-name t --describe [--all]
    kafka-configs ... --topic t --alter --add-config k=v,k2=[a,b] --delete-config k3,k4
    kafka-configs ... --entity-type users --entity-name alice --alter \
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    kafka-configs ... --user alice --alter --delete-config SCRAM-SHA-512
    kafka-configs ... --entity-type users [--entity-name alice] --describe
    kafka-configs ... --entity-type users --entity-name alice --entity-type clients \
        --entity-default --alter --add-config producer_byte_rate=1048576,request_percentage=50
    kafka-configs ... --entity-type clients [--entity-name app | --entity-default] --describe

Describe output follows Kafka's ConfigCommand:

    Dynamic configs for topic t are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}
    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192
    Quota configs for user-principal 'alice', the default client-id are producer_byte_rate=1048576.0

(`All configs for ...` with --all). A SCRAM credential without `iterations=` gets Kafka's
default, 4096. Errors are one line: `Error while executing config command : <reason>`, exit 1.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING, Any, Literal, cast

from clients.aio.scram_types import (DEFAULT_ITERATIONS, MIN_ITERATIONS, ScramCredentialInfo,
                                     ScramMechanism, UserScramCredentialAlteration,
                                     UserScramCredentialDeletion, UserScramCredentialUpsertion)
from clients.protocol.errors import KafkaError, ResourceNotFoundError

from .common import (CliError, ToolParser, add_connection_args, admin_client, parse_config_list,
                     read_config_file, run_tool)

if TYPE_CHECKING:
    from clients.admin import AdminClient
    from clients.aio.admin import ConfigEntry, ResourceType

ERROR_PREFIX = "Error while executing config command : "

# DescribeConfigs source ids -> Kafka's ConfigSource names.
SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}

EntityKind = Literal["topic", "broker", "user"]
ENTITY_TYPES: dict[str, EntityKind] = {"topics": "topic", "brokers": "broker", "users": "user"}
SCRAM_KEYS = tuple(m.mechanism_name for m in ScramMechanism if m is not ScramMechanism.UNKNOWN)
# ConfigCommand's pattern of a SCRAM credential value.
_SCRAM_VALUE = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.S)


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-configs",
                   description="Add, remove or describe topic and broker configs and users' "
                               "SCRAM credentials.")
    add_connection_args(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    actions.add_argument("--alter", action="store_true", help="Alter the configuration of the entity.")
    p.add_argument("--entity-type", action="append", choices=sorted({*ENTITY_TYPES, "clients"}),
                   help="Type of entity (topics/brokers/users/clients); users and clients "
                        "together name a user's quotas for a client id.")
    # One list in command-line order, as ConfigCommand pairs names with types: a name, or
    # "" for --entity-default (the default user, client id or broker).
    p.add_argument("--entity-name", action="append", dest="entity_names",
                   help="Name of the entity (topic name / broker id / user / client id).")
    p.add_argument("--entity-default", action="append_const", const="", dest="entity_names",
                   help="The default entity (cluster-wide broker defaults, default user or "
                        "client id).")
    p.add_argument("--client", help="Shorthand for --entity-type clients --entity-name CLIENT.")
    p.add_argument("--topic", help="Shorthand for --entity-type topics --entity-name TOPIC.")
    p.add_argument("--broker", help="Shorthand for --entity-type brokers --entity-name ID.")
    p.add_argument("--user", help="Shorthand for --entity-type users --entity-name USER.")
    p.add_argument("--broker-defaults", action="store_true",
                   help="Shorthand for --entity-type brokers --entity-default.")
    p.add_argument("--all", action="store_true",
                   help="With --describe: all configs, not only the dynamic ones.")
    p.add_argument("--add-config", metavar="K=V,K2=[A,B]", help="Configs to add or set.")
    p.add_argument("--add-config-file", metavar="FILE", help="A properties file of configs to add.")
    p.add_argument("--delete-config", metavar="K1,K2", help="Config keys to remove.")
    return p


def resolve_entity(args: argparse.Namespace) -> tuple[EntityKind, str | None]:
    """(entity "topic"/"broker"/"user", name or None for all topics / users; "" for the
    broker defaults)."""
    given = [(t, n) for t, n in (("topics", args.topic), ("brokers", args.broker),
                                 ("users", args.user)) if n is not None]
    if args.broker_defaults:
        given.append(("brokers", ""))
    types, names = args.entity_type or [], args.entity_names or []
    if len(types) > 1 or len(names) > 1:
        raise CliError("only one entity may be given "
                       "(--entity-type/--topic/--broker/--user/--broker-defaults)")
    if types:
        name = names[0] if names else None
        if name == "" and types[0] != "brokers":
            raise CliError("--entity-default is only supported for --entity-type brokers")
        given.append((types[0], name))
    elif names:
        raise CliError("--entity-type must be specified with --entity-name / --entity-default")
    if not given:
        raise CliError("one of --entity-type, --topic, --broker, --user or --broker-defaults "
                       "is required")
    if len(given) > 1:
        raise CliError("only one entity may be given "
                       "(--entity-type/--topic/--broker/--user/--broker-defaults)")
    etype, name = given[0]
    if etype == "brokers" and name not in (None, "") and not name.isdigit():
        raise CliError(f"The entity name for brokers must be a valid integer broker id, "
                       f"but it is: {name}")
    return ENTITY_TYPES[etype], name


def source_name(source: int | str) -> str:
    if isinstance(source, int):
        return SOURCE_NAMES.get(source, str(source))
    return str(source)


def entry_line(e: ConfigEntry) -> str:
    """`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` for one ConfigEntry."""
    sensitive = bool(getattr(e, "sensitive", False))
    value = "null" if sensitive or e.value is None else e.value
    synonyms = getattr(e, "synonyms", None)
    if synonyms is None:  # the admin entry carries its own source only
        synonyms = [] if getattr(e, "is_default", False) and e.value is None else [
            (source_name(e.source), e.name, value)]
    syn = ", ".join(f"{source_name(_field(s, 'source', 0))}:{_field(s, 'name', 1)}="
                    f"{'null' if sensitive else _field(s, 'value', 2)}" for s in synonyms)
    return f"  {e.name}={value} sensitive={str(sensitive).lower()} synonyms={{{syn}}}"


def _field(s: Any, name: str, index: int) -> Any:
    return getattr(s, name) if hasattr(s, name) else s[index]


def is_dynamic(e: ConfigEntry, resource_type: str, name: str | None) -> bool:
    src = source_name(e.source)
    if resource_type == "topic":
        return src == "DYNAMIC_TOPIC_CONFIG"
    return src == ("DYNAMIC_DEFAULT_BROKER_CONFIG" if not name else "DYNAMIC_BROKER_CONFIG")


def describe_header(resource_type: str, name: str | None, show_all: bool) -> str:
    kind = "All" if show_all else "Dynamic"
    if resource_type == "broker" and not name:
        return f"{'All' if show_all else 'Default'} configs for brokers in the cluster are:"
    return f"{kind} configs for {resource_type} {name} are:"


def describe_lines(entries: dict[str, ConfigEntry], resource_type: str, name: str | None,
                   show_all: bool) -> list[str]:
    lines = [describe_header(resource_type, name, show_all)]
    for key in sorted(entries):
        e = entries[key]
        if show_all or is_dynamic(e, resource_type, name):
            lines.append(entry_line(e))
    return lines


def alter_request(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    """(configs to set, keys to delete) from --add-config / --add-config-file / --delete-config."""
    to_set: dict[str, str] = {}
    if args.add_config_file:
        to_set.update(read_config_file(args.add_config_file))
    if args.add_config:
        to_set.update(parse_config_list(args.add_config))
    to_delete = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not to_set and not to_delete:
        raise CliError("--alter needs --add-config, --add-config-file or --delete-config")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise CliError(f"Invalid config(s): {','.join(both)} (both added and deleted)")
    return to_set, to_delete


# ---------------------------------------------------------------------- users (SCRAM)

def parse_scram_credential(mechanism: ScramMechanism, text: str) -> tuple[int, str]:
    """`[iterations=N,]password=P` -> (iterations, password); iterations default 4096 and
    must be at least the mechanism's minimum, as ConfigCommand checks."""
    m = _SCRAM_VALUE.fullmatch(text)
    if m is None or (m.group(1) is not None and m.group(1) in ("", "-")):
        raise CliError(f"Invalid credential property {mechanism.mechanism_name}={text}")
    raw = m.group(1)
    iterations = int(raw) if raw is not None and raw != "-1" else DEFAULT_ITERATIONS
    if iterations < MIN_ITERATIONS:
        raise CliError(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} "
                       f"required for {mechanism.mechanism_name}")
    return iterations, m.group(2)


def scram_alterations(user: str, to_set: dict[str, str],
                      to_delete: list[str]) -> list[UserScramCredentialAlteration]:
    """The SCRAM upsertions and deletions an --alter of a user's SCRAM mechanisms asks for."""
    unknown = [k for k in [*to_set, *to_delete] if k not in SCRAM_KEYS]
    if unknown:
        raise CliError(f"Only SCRAM credential configs ({', '.join(SCRAM_KEYS)}) can be altered "
                       f"for 'users'. Unexpected config names: {', '.join(unknown)}")
    out: list[UserScramCredentialAlteration] = [
        UserScramCredentialDeletion(user, ScramMechanism.from_name(k)) for k in to_delete]
    for key, value in to_set.items():
        mechanism = ScramMechanism.from_name(key)
        iterations, password = parse_scram_credential(mechanism, value)
        out.append(UserScramCredentialUpsertion(user, mechanism, iterations, password))
    return out


def scram_describe_line(user: str, infos: list[ScramCredentialInfo]) -> str:
    return f"SCRAM credential configs for user-principal '{user}' are " + \
        ", ".join(str(i) for i in infos)


def scram_error_line(user: str, error: KafkaError) -> str:
    """Kafka's line for a user it could not describe, naming the Java exception class."""
    java_name = "".join(w.capitalize() for w in error.name.split("_")) + "Exception"
    message = error.message.removeprefix(f"user {user}: ")   # the admin client's prefix
    return (f"Error retrieving SCRAM credential configs for user-principal '{user}': "
            f"{java_name}: {message}")


def run_users(admin: AdminClient, name: str | None,
              alterations: list[UserScramCredentialAlteration] | None, out: Any) -> int:
    """--alter (with `alterations`) or --describe of users' SCRAM credentials."""
    if alterations is not None:
        admin.alter_user_scram_credentials(alterations)
        print(f"Completed updating config for user {name}.", file=out)
        return 0
    if name is None:
        for user, infos in admin.describe_user_scram_credentials(None).items():
            print(scram_describe_line(user, infos), file=out)
        return 0
    try:
        infos = admin.describe_user_scram_credentials([name])[name]
    except ResourceNotFoundError as e:
        print(scram_error_line(name, e), file=out)   # as Kafka: reported, not a failure
        return 0
    print(scram_describe_line(name, infos), file=out)
    return 0


# ---------------------------------------------------------------------- client quotas

QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id"}
ANY_NAME = object()           # an entity type given without a name: every named entity


def quota_entity(args: argparse.Namespace) -> list[tuple[str, Any]] | None:
    """[(entity type "user"/"client-id", name, "" the default, or ANY_NAME)] when the command
    is about users or clients, else None. Names pair with types in order, as ConfigCommand."""
    types = list(args.entity_type or [])
    names = list(args.entity_names or [])
    if args.user is not None:
        types.append("users")
        names.append(args.user)
    if args.client is not None:
        types.append("clients")
        names.append(args.client)
    if not types or not set(types) & set(QUOTA_ENTITY_TYPES):
        return None
    if not set(types) <= set(QUOTA_ENTITY_TYPES) or len(set(types)) != len(types) \
            or args.topic is not None or args.broker is not None or args.broker_defaults:
        raise CliError("Only 'users' and 'clients' may be given together, once each")
    if len(names) > len(types):
        raise CliError("more --entity-name/--entity-default than --entity-type")
    names += [ANY_NAME] * (len(types) - len(names))
    return [(QUOTA_ENTITY_TYPES[t], n) for t, n in zip(types, names)]


def quota_entity_text(entity: tuple[tuple[str, str | None], ...]) -> str:
    """ConfigCommand's name of an entity: user-principal 'alice', the default client-id."""
    parts = dict(entity)
    out = []
    for t, kind in (("user", "user-principal"), ("client-id", "client-id")):
        if t in parts:
            out.append(f"{kind} '{parts[t]}'" if parts[t] is not None else f"the default {kind}")
    return ", ".join(out)


def quota_value_text(value: float) -> str:
    """As Java prints a double: 1048576.0, 50.5, 1.0E10."""
    if value == int(value) and abs(value) < 1e7:
        return f"{value:.1f}"
    text = repr(float(value))
    return text.replace("e+", "E").replace("e-", "E-")


def run_quotas(admin: AdminClient, entity: list[tuple[str, Any]], args: argparse.Namespace,
               out: Any) -> int:
    """--describe or --alter of users' and client ids' quotas (and a user's SCRAM
    credentials, which share its entity)."""
    lone_user = [t for t, _ in entity] == ["user"]
    if args.describe:
        components = [(t, 2, None) if n is ANY_NAME else (t, 1, None) if n == "" else (t, 0, n)
                      for t, n in entity]
        for e, values in admin.describe_client_quotas(components, strict=True).items():
            text = ", ".join(f"{k}={quota_value_text(v)}" for k, v in sorted(values.items()))
            print(f"Quota configs for {quota_entity_text(e)} are {text}", file=out)
        if lone_user and entity[0][1] != "":
            name = entity[0][1]
            run_users(admin, None if name is ANY_NAME else name, None, out)
        return 0
    to_set, to_delete = alter_request(args)
    scram_set = {k: v for k, v in to_set.items() if k in SCRAM_KEYS}
    scram_delete = [k for k in to_delete if k in SCRAM_KEYS]
    if (scram_set or scram_delete) and not (lone_user and entity[0][1]):
        raise CliError("SCRAM credentials may only be altered for a named user")
    ops: dict[str, float | None] = {k: None for k in to_delete if k not in SCRAM_KEYS}
    for key, text in to_set.items():
        if key in SCRAM_KEYS:
            continue
        try:
            ops[key] = float(text)
        except ValueError:
            raise CliError(f"Invalid value {text} for quota config {key}") from None
    if ops:
        admin.alter_client_quotas([({t: (n or None) for t, n in entity}, ops)])
    if scram_set or scram_delete:
        admin.alter_user_scram_credentials(scram_alterations(entity[0][1], scram_set, scram_delete))
    first_type, first_name = entity[0]
    plural = "users" if first_type == "user" else "clients"
    if first_name:
        print(f"Completed updating config for {plural[:-1]} {first_name}.", file=out)
    else:
        print(f"Completed updating default config for {plural} in the cluster.", file=out)
    return 0


def run(args: argparse.Namespace, out=None) -> int:
    out = out or sys.stdout
    if args.describe and (args.add_config or args.add_config_file or args.delete_config):
        raise CliError("--add-config/--delete-config can only be used with --alter")
    entity = quota_entity(args)
    if entity is not None:
        if args.alter and any(n is ANY_NAME for _, n in entity):
            # Checked before connecting, as Kafka's ConfigCommand checks its options.
            raise CliError("An entity name must be specified for every entity type with --alter")
        with admin_client(args, ERROR_PREFIX) as admin:
            return run_quotas(admin, entity, args, out)
    kind, name = resolve_entity(args)     # users went to run_quotas above
    resource_type = cast("ResourceType", kind)
    if args.alter:
        if resource_type == "topic" and not name:
            raise CliError("an entity name (--entity-name or --topic) is required with --alter")
        to_set, to_delete = alter_request(args)
    with admin_client(args, ERROR_PREFIX) as admin:
        if args.describe:
            names = [name] if name is not None else sorted(admin.list_topics()) \
                if resource_type == "topic" else [""]
            for n in names:
                entries = admin.describe_configs(resource_type, n)
                for line in describe_lines(entries, resource_type, n, args.all):
                    print(line, file=out)
            return 0
        target = name or ""                  # "" with brokers: the cluster-wide defaults
        if to_delete and resource_type == "topic":
            # As Kafka: deleting a key that is not set on the topic is a mistake, say so.
            current = admin.describe_configs(resource_type, target)
            missing = [k for k in to_delete if k not in current or
                       not is_dynamic(current[k], resource_type, name)]
            if missing:
                raise CliError(f"Invalid config(s): {','.join(missing)}")
        admin.alter_configs(resource_type, target, set=to_set or None, delete=to_delete or None)
        if resource_type == "broker" and not name:
            print("Completed updating default config for brokers in the cluster.", file=out)
        else:
            print(f"Completed updating config for {resource_type} {name}.", file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
