"""kafka-acls: add, list and remove ACLs through the admin client (Kafka's AclCommand with
--bootstrap-server).

    kafka-acls --bootstrap-server H:P --add --allow-principal User:alice --operation Read --topic t
    kafka-acls ... --add --allow-principal User:bob --producer --topic t [--idempotent]
    kafka-acls ... --list [--topic t] [--principal User:alice]
    kafka-acls ... --remove [--force] --allow-principal User:alice --operation Read --topic t

The flags build, per resource pattern (or pattern filter), the set of access control entries,
exactly as AclCommand does: every allowed principal x operation x allowed host (host "*" unless
--allow-host), the same for --deny-*; --producer / --consumer replace --operation with the
role's operations. Output is AclCommand's:

    Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: 
     \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) 

then the resources' current ACLs (`Current ACLs for resource ...`). --remove asks
`Are you sure you want to remove ACLs: ... (y/n)` on stdin unless --force. Kafka prints sets in
hash order; this tool sorts them. Errors are one line: `Error while executing ACL command: ...`.
"""
from __future__ import annotations

import argparse
import sys
from typing import IO, Iterable

from clients.aio.acl_types import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern
from clients.protocol.acl import (CLUSTER_NAME, WILDCARD_HOST, AclOperation, AclPermissionType,
                                  PatternType, ResourceType, parse_title)

from .common import CliError, ToolParser, add_connection_args, admin_client, run_tool

ERROR_PREFIX = "Error while executing ACL command: "
NL = "\n"

CLUSTER_FILTER = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)

# Kafka's AclEntry.supportedOperations (ALL is valid everywhere).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                   AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                                     AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                                     AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

PRODUCER_TOPIC_OPS = (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
PRODUCER_TXN_OPS = (AclOperation.WRITE, AclOperation.DESCRIBE)
CONSUMER_TOPIC_OPS = (AclOperation.READ, AclOperation.DESCRIBE)
CONSUMER_GROUP_OPS = (AclOperation.READ,)

AclMap = dict[ResourcePattern, set[AccessControlEntry]]


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-acls", description="This tool helps to manage acls on kafka.")
    add_connection_args(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    actions.add_argument("--remove", action="store_true",
                         help="Indicates you are trying to remove ACLs.")
    actions.add_argument("--list", action="store_true",
                         help="List ACLs for the specified resource, use --topic <topic> or "
                              "--group <group> or --cluster to specify a resource.")
    many = "append"       # repeatable flags, as Kafka's
    p.add_argument("--topic", action=many, help="Topic to which ACLs should be added or "
                   "removed. A value of '*' indicates ACL should apply to all topics.")
    p.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    p.add_argument("--group", action=many, help="Consumer Group to which the ACLs should be "
                   "added or removed. A value of '*' indicates the ACLs should apply to all "
                   "groups.")
    p.add_argument("--transactional-id", action=many, help="The transactionalId to which ACLs "
                   "should be added or removed. A value of '*' indicates the ACLs should apply "
                   "to all transactionalIds.")
    p.add_argument("--delegation-token", action=many,
                   help="Delegation token to which ACLs should be added or removed.")
    p.add_argument("--user-principal", action=many,
                   help="A user principal as a resource (for CreateTokens / DescribeTokens).")
    p.add_argument("--idempotent", action="store_true",
                   help="Enable idempotence for the producer (with --producer).")
    p.add_argument("--resource-pattern-type", default="literal",
                   metavar="ANY|MATCH|LITERAL|PREFIXED",
                   help="The type of the resource pattern or pattern filter: 'literal' or "
                        "'prefixed' when adding; with --list/--remove also 'any' (any pattern "
                        "type, the name exactly) or 'match' (every ACL that affects the "
                        "resource). Default literal.")
    p.add_argument("--operation", action=many, help="Operation that is being allowed or "
                   "denied: Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                   "DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, "
                   "DescribeTokens, All (default All).")
    p.add_argument("--allow-principal", action=many, help="principal is in "
                   "principalType:name format, e.g. User:alice; User:'*' is the wild card "
                   "indicating all users.")
    p.add_argument("--deny-principal", action=many, help="principal is in principalType:name "
                   "format. DENY RULES TAKE PRECEDENCE OVER ALLOW RULES.")
    p.add_argument("--principal", action=many,
                   help="With --list: list ACLs for this principal (repeatable).")
    p.add_argument("--allow-host", action=many, help="Host from which principals listed in "
                   "--allow-principal will have access (default '*').")
    p.add_argument("--deny-host", action=many, help="Host from which principals listed in "
                   "--deny-principal will be denied access (default '*').")
    p.add_argument("--producer", action="store_true", help="Convenience option to add/remove "
                   "ACLs for producer role: WRITE, DESCRIBE and CREATE on topic.")
    p.add_argument("--consumer", action="store_true", help="Convenience option to add/remove "
                   "ACLs for consumer role: READ, DESCRIBE on topic and READ on group.")
    p.add_argument("--force", action="store_true",
                   help="Assume Yes to all queries and do not prompt.")
    return p


# ---------------------------------------------------------------------- argument rules

def _invalid_with(args: argparse.Namespace, used: str, others: Iterable[str]) -> None:
    if not getattr(args, used.replace("-", "_")):
        return
    for other in others:
        if getattr(args, other.replace("-", "_")):
            raise CliError(f'Option "[{used}]" can\'t be used with option "[{other}]"')


def check_args(args: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs: the flag combinations Kafka refuses, as CliErrors."""
    _invalid_with(args, "list", ("producer", "consumer", "allow-host", "allow-principal",
                                 "deny-host", "deny-principal"))
    for role in ("producer", "consumer"):
        _invalid_with(args, role, ("operation", "deny-principal", "deny-host"))
    if args.principal and not args.list:
        raise CliError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise CliError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise CliError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or (
            not args.producer and (args.cluster or args.transactional_id))):
        raise CliError("With --consumer you must specify a --topic and a --group and no "
                       "--cluster or --transactional-id option should be specified.")


def pattern_type(args: argparse.Namespace) -> PatternType:
    text = args.resource_pattern_type.strip().upper()
    if text not in PatternType.__members__ or text == "UNKNOWN":
        raise CliError(f"Unknown resource-pattern-type: {args.resource_pattern_type}")
    return PatternType[text]


def parse_principal(text: str) -> str:
    """Kafka's SecurityUtils.parseKafkaPrincipal: `Type:name`, kept as that text."""
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind:
        raise CliError(f"expected a string in format principalType:principalName but got {text}")
    return f"{kind}:{name}"


def parse_operation(text: str) -> AclOperation:
    try:
        op = parse_title(AclOperation, text)
    except ValueError:
        op = None
    if op is None or op in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise CliError(f"Unknown operation: {text.strip()}")
    return AclOperation(op)


def resource_filters(args: argparse.Namespace, required: bool = True) -> list[ResourcePattern]:
    """getResourceFilter: the resources named by --topic, --cluster (and --idempotent),
    --group, --transactional-id, ... with --resource-pattern-type. --cluster only counts
    with the literal pattern type, as in Kafka."""
    pt = pattern_type(args)
    found: list[ResourcePattern] = []

    def add(rtype: ResourceType, names: list[str] | None, strip: bool = True) -> None:
        for n in names or ():
            found.append(ResourcePattern(rtype, n.strip() if strip else n, pt))

    add(ResourceType.TOPIC, args.topic)
    if pt == PatternType.LITERAL and (args.cluster or args.idempotent):
        found.append(CLUSTER_FILTER)
    add(ResourceType.GROUP, args.group)
    add(ResourceType.TRANSACTIONAL_ID, args.transactional_id, strip=False)  # as Kafka: untrimmed
    add(ResourceType.DELEGATION_TOKEN, args.delegation_token)
    add(ResourceType.USER, args.user_principal)
    if not found and required:
        raise CliError("You must provide at least one resource: --topic <topic> or --cluster "
                       "or --group <group> or --delegation-token <Delegation Token ID>")
    return list(dict.fromkeys(found))


def entries(args: argparse.Namespace,
            operations: Iterable[AclOperation]) -> set[AccessControlEntry]:
    """getAcl: allowed principals x operations x allowed hosts, and the same for denies."""
    ops = list(operations)
    out: set[AccessControlEntry] = set()
    for principals, hosts, permission in (
            (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
            (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        if not principals:
            continue
        host_set = {h.strip() for h in hosts} if hosts else {WILDCARD_HOST}
        for principal in {parse_principal(p) for p in principals}:
            for op in ops:
                for host in host_set:
                    out.add(AccessControlEntry(principal, host, op, permission))
    return out


def filter_to_acls(args: argparse.Namespace) -> AclMap:
    """getResourceFilterToAcls: each resource pattern (filter) with the entries the flags
    give it; --producer and --consumer may be combined."""
    acls: AclMap = {}
    if not args.producer and not args.consumer:
        shared = entries(args, {parse_operation(o) for o in (args.operation or ["All"])})
        acls.update({f: set(shared) for f in resource_filters(args)})
    if args.producer:
        filters = resource_filters(args)
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                acls[f] = entries(args, PRODUCER_TOPIC_OPS)
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                acls[f] = entries(args, PRODUCER_TXN_OPS)
        if args.idempotent:
            acls[CLUSTER_FILTER] = entries(args, (AclOperation.IDEMPOTENT_WRITE,))
    if args.consumer:
        for f in resource_filters(args):
            role_ops = {ResourceType.TOPIC: CONSUMER_TOPIC_OPS,
                        ResourceType.GROUP: CONSUMER_GROUP_OPS}.get(f.resource_type)
            if role_ops is not None:
                acls[f] = acls.get(f, set()) | entries(args, role_ops)
    validate_operations(acls)
    return acls


def validate_operations(acls: AclMap) -> None:
    for pattern, found in acls.items():
        valid = SUPPORTED_OPERATIONS.get(pattern.resource_type, frozenset()) | {AclOperation.ALL}
        if any(e.operation not in valid for e in found):
            names = ", ".join(op.title for op in sorted(valid))
            raise CliError(f"ResourceType {pattern.resource_type.name} only supports "
                           f"operations {names}")


def resource_to_acls(args: argparse.Namespace) -> AclMap:
    """getResourceToAcls (for --add): the pattern type must be literal or prefixed, and every
    resource must get at least one entry."""
    pt = pattern_type(args)
    if pt not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CliError(f"A '--resource-pattern-type' value of '{pt.name}' is not valid when "
                       f"adding acls.")
    acls = filter_to_acls(args)
    if any(not found for found in acls.values()):
        raise CliError("You must specify one of: --allow-principal, --deny-principal when "
                       "trying to add ACLs.")
    return acls


def bindings_to_add(acls: AclMap) -> list[AclBinding]:
    return sorted(AclBinding.of(p, e) for p, found in acls.items() for e in found)


def delete_filters(pattern: ResourcePattern,
                   found: set[AccessControlEntry]) -> list[AclBindingFilter]:
    """What --remove deletes for one resource filter: everything on it when no entry was
    given, else exactly those entries."""
    if not found:
        return [AclBindingFilter.of(pattern)]
    return [AclBindingFilter.of(pattern, e) for e in sorted(found)]


def list_filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    """The DescribeAcls filters of --list (and of the listing after --add / --remove)."""
    filters = resource_filters(args, required=False)
    if not filters:
        return [AclBindingFilter.ANY]
    return [AclBindingFilter.of(f) for f in filters]


def by_resource(bindings: Iterable[AclBinding]) -> AclMap:
    out: AclMap = {}
    for b in bindings:
        out.setdefault(b.pattern, set()).add(b.entry)
    return out


# ---------------------------------------------------------------------- output

def acl_block(head: str, pattern: ResourcePattern, found: Iterable[AccessControlEntry],
              tail: str = "") -> str:
    """AclCommand's `<head> `<pattern>`: \\n \\t<entry>\\n\\t<entry> \\n` (print adds one
    more newline)."""
    lines = NL.join(f"\t{e}" for e in sorted(found))
    return f"{head} `{pattern}`: {NL} {lines} {NL}{tail}"


def remove_prompt(pattern: ResourcePattern, found: set[AccessControlEntry]) -> str:
    if not found:
        return f"Are you sure you want to delete all ACLs for resource filter `{pattern}`? (y/n)"
    lines = NL.join(f"\t{e}" for e in sorted(found))
    return (f"Are you sure you want to remove ACLs: {NL} {lines} {NL} from resource filter "
            f"`{pattern}`? (y/n)")


def listing(acls: AclMap, principals: list[str]) -> list[str]:
    """The blocks --list prints: every resource, or per --principal only its entries."""
    if not principals:
        return [acl_block("Current ACLs for resource", p, acls[p]) for p in sorted(acls)]
    out = []
    for principal in principals:
        out.append(f"ACLs for principal `{principal}`")
        for p in sorted(acls):
            mine = {e for e in acls[p] if e.principal == principal}
            if mine:
                out.append(acl_block("Current ACLs for resource", p, mine))
    return out


# ---------------------------------------------------------------------- running

def run(args: argparse.Namespace, out: IO[str] | None = None, stdin: IO[str] | None = None) -> int:
    out = out or sys.stdout
    stdin = stdin or sys.stdin
    check_args(args)
    if args.add:
        to_add = resource_to_acls(args)
    elif args.remove:
        to_remove = filter_to_acls(args)
    principals = [parse_principal(p) for p in args.principal or ()]

    def confirmed(question: str) -> bool:
        if args.force:
            return True
        print(question, file=out, flush=True)
        return stdin.readline().strip().lower() == "y"

    with admin_client(args, ERROR_PREFIX) as admin:
        if args.add:
            for pattern in sorted(to_add):
                print(acl_block("Adding ACLs for resource", pattern, to_add[pattern]), file=out)
                admin.create_acls(bindings_to_add({pattern: to_add[pattern]}))
        elif args.remove:
            for pattern in sorted(to_remove):
                if confirmed(remove_prompt(pattern, to_remove[pattern])):
                    admin.delete_acls(delete_filters(pattern, to_remove[pattern]))
        found: set[AclBinding] = set()
        for f in list_filters(args):
            found.update(admin.describe_acls(f))
        for block in listing(by_resource(found), principals):
            print(block, file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
