"""kafka-configs: describe and alter topic and broker configs (IncrementalAlterConfigs) and
users' SCRAM credentials (Describe/AlterUserScramCredentials).

    kafka-configs --bootstrap-server H:P --entity-type topics --entity-name t --describe [--all]
    kafka-configs ... --topic t --alter --add-config k=v,k2=[a,b] --delete-config k3,k4
    kafka-configs ... --entity-type users --entity-name alice --alter \
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    kafka-configs ... --user alice --alter --delete-config SCRAM-SHA-512
    kafka-configs ... --entity-type users [--entity-name alice] --describe

Describe output follows Kafka's ConfigCommand:

    Dynamic configs for topic t are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}
    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192

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
    p.add_argument("--entity-type", choices=sorted(ENTITY_TYPES),
                   help="Type of entity (topics/brokers/users).")
    p.add_argument("--entity-name", help="Name of the entity (topic name / broker id / user).")
    p.add_argument("--entity-default", action="store_true",
                   help="Default entity name for brokers (cluster-wide defaults).")
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
    if args.entity_type:
        name = args.entity_name
        if args.entity_default:
            if args.entity_type != "brokers":
                raise CliError("--entity-default is only supported for --entity-type brokers")
            name = ""
        given.append((args.entity_type, name))
    elif args.entity_name is not None or args.entity_default:
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
    """The SCRAM upsertions and deletions an --alter of `users` asks for. Only the SCRAM
    mechanisms are configs of a user here (strom has no client quotas)."""
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


def run(args: argparse.Namespace, out=None) -> int:
    out = out or sys.stdout
    kind, name = resolve_entity(args)
    if args.describe and (args.add_config or args.add_config_file or args.delete_config):
        raise CliError("--add-config/--delete-config can only be used with --alter")
    if kind == "user":
        alterations = None
        if args.alter:
            if not name:
                raise CliError("An entity name must be specified for every entity type")
            alterations = scram_alterations(name, *alter_request(args))
        with admin_client(args, ERROR_PREFIX) as admin:
            return run_users(admin, name, alterations, out)
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
