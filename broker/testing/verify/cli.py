"""strom-verify: a Jepsen-style durability check against any Kafka-compatible cluster.

    strom-verify --bootstrap-server 127.0.0.1:9092 [--topic T] [--rate 200] [--duration 30]
                 [--acks all|1] [--idempotence | --no-idempotence]
                 [--faults kill9,pause,leader-ahead --cluster-dir DIR
                  [--fault-interval S] [--fault-duration S] [--fault-rounds N]] [--json]
    strom-verify --netns-cluster 3 [--data-dir DIR] [--broker-property KEY=VALUE]
                 [--faults isolate-leader,isolate-follower,cut-controller-zk,one-way,bridge,kill9 ...]

Produces numbered values (b"<run>-<seq>") with strom's own producer at --rate records/s for
--duration seconds, recording every acknowledgement (partition, offset) and every failure;
meanwhile, with --faults, injects faults into the local strom cluster of --cluster-dir, one
every --fault-interval seconds, each held --fault-duration seconds and then healed (with
--fault-rounds N: the list N times over, however long that takes). Then it reads every
partition back from its start to its end offset and compares (the checker of strom's fault
tests, broker/testing/verify/checker.py): acknowledged, lost, duplicated,
reordered, conflicting (one offset acknowledged or read with two values), failed sends,
faults done. The topic is created if missing (--partitions, --replication-factor,
--min-insync-replicas, --topic-config). Progress and the fault log go to stderr, the summary
(or with --json its JSON) to stdout.

With --netns-cluster N (root only) strom-verify starts the cluster itself: ZooKeeper and N
brokers each in a network namespace of its own (netns_cluster.py), which the partition fault
kinds cut apart (partition_faults.py); the cluster and its namespaces are removed at the end,
also on Ctrl-C, SIGTERM or an error.

Exit status: 0 nothing acknowledged was lost or conflicts (nor, with idempotence, duplicated
or reordered); 1 it was; 2 a usage error; 3 the run could not be made or proves nothing (no
broker reachable, the topic not ready, a fault that could not be done or healed, the read
back incomplete, nothing acknowledged).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

from broker.testing.netns import NetnsUnavailable, unavailable_reason
from broker.testing.verify import summary
from broker.testing.verify.checker import Checker
from broker.testing.verify.cluster_view import TRANSIENT, ClusterView
from broker.testing.verify.faults import FaultContext, FaultSchedule, fault_kinds
from broker.testing.verify.local_cluster import ClusterError, LocalCluster, open_cluster
from broker.testing.verify.netns_cluster import MAX_BROKERS, MIN_BROKERS, NetnsCluster
from broker.testing.verify.workload import RateProducer, read_back
from broker.testing.zookeeper import ZooKeeperUnavailable
from clients.command_line import CliError, ToolParser, describe_error, wait_reachable
from clients.properties import ConfigError, read_properties

PROG = "strom-verify"
PROGRESS_EVERY = 5.0


class CouldNotRun(Exception):
    """The run cannot be made, or what it did proves nothing: exit COULD_NOT_RUN."""


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key.strip(), value.strip()


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {text}")
        return value
    return parse


def build_parser() -> ToolParser:
    p = ToolParser(prog=PROG, description="Produce at a set rate (optionally under faults), read "
                   "everything back, and report acknowledged records lost, duplicated, "
                   "reordered or conflicting.")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                   help="the cluster to check (any Kafka-compatible one); required unless "
                        "--netns-cluster")
    p.add_argument("--netns-cluster", type=_positive(int), metavar="N",
                   help=f"start a strom cluster to check ({MIN_BROKERS}-{MAX_BROKERS} brokers): "
                        "ZooKeeper and each broker in a network namespace of its own, so that "
                        "the partition fault kinds can cut them apart; removed at the end. "
                        "Root only (iproute2, iptables)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="with --netns-cluster: the cluster's files (logs, data), kept after "
                        "the run; must be empty or absent (default: a temporary directory, "
                        "removed)")
    p.add_argument("--broker-property", type=_key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="with --netns-cluster: a server.properties "
                   "setting of every broker (e.g. zookeeper.session.timeout.ms=3000); repeatable")
    p.add_argument("--topic", help="topic to write and read (created if missing; default a new "
                                   "strom-verify-<random> topic per run)")
    p.add_argument("--partitions", type=_positive(int), default=3,
                   help="partitions of a topic this run creates (default 3)")
    p.add_argument("--replication-factor", type=_positive(int), default=3,
                   help="replication factor of a topic this run creates (default 3)")
    p.add_argument("--min-insync-replicas", type=_positive(int), default=2,
                   help="min.insync.replicas of a topic this run creates (default 2)")
    p.add_argument("--topic-config", type=_key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="more configs of a topic this run creates "
                   "(e.g. unclean.leader.election.enable=true); repeatable")
    p.add_argument("--rate", type=_positive(float), default=200.0,
                   help="records per second (default 200)")
    p.add_argument("--duration", type=_positive(float), default=30.0,
                   help="seconds of producing (default 30)")
    p.add_argument("--acks", choices=["all", "-1", "1"], default="all",
                   help="the producer's acks (default all; 0 gives no offsets to check)")
    idem = p.add_mutually_exclusive_group()
    idem.add_argument("--idempotence", dest="idempotence", action="store_true", default=None,
                      help="enable.idempotence (the default with acks=all; needs acks=all)")
    idem.add_argument("--no-idempotence", dest="idempotence", action="store_false",
                      help="plain retries: duplicates and reordering are then counted, "
                           "not held against the cluster")
    p.add_argument("--producer-property", type=_key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="a producer setting (e.g. linger.ms=20); repeatable")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties for the producer, consumer and admin client "
                        "(security.protocol, sasl.*, ssl.*, ...)")
    p.add_argument("--faults", default="", metavar="KIND[,KIND...]",
                   help="faults to inject in turn, from: "
                        + ", ".join(sorted(fault_kinds())) + " (see --list-faults); needs "
                        "--cluster-dir or --netns-cluster (the network partitions: "
                        "--netns-cluster)")
    p.add_argument("--cluster-dir", type=Path, metavar="DIR",
                   help="the local strom cluster the faults act on: a bin/start-cluster.sh "
                        "--data-dir (brokers started again with start-cluster.sh --broker N), "
                        "or a directory whose run/ holds broker-...-ID.pid files")
    p.add_argument("--fault-interval", type=_positive(float), default=5.0,
                   help="seconds between the end of one fault and the start of the next "
                        "(default 5)")
    p.add_argument("--fault-duration", type=_positive(float), default=3.0,
                   help="seconds a fault holds before it is healed (default 3)")
    p.add_argument("--fault-rounds", type=_positive(int), metavar="N",
                   help="inject the list of --faults N times over, however long that takes "
                        "(producing goes on until they are done and --duration has passed); "
                        "default: faults in turn for as long as --duration lasts")
    p.add_argument("--seed", type=int, help="seed of the faults' choice of victims")
    p.add_argument("--list-faults", action="store_true", help="describe the fault kinds and exit")
    p.add_argument("--ready-timeout", type=_positive(float), default=60.0,
                   help="seconds for the topic to be in sync before producing (default 60)")
    p.add_argument("--flush-timeout", type=_positive(float), default=30.0,
                   help="seconds to deliver what is buffered when producing ends (default 30)")
    p.add_argument("--read-timeout", type=_positive(float), default=120.0,
                   help="seconds to read everything back (default 120)")
    p.add_argument("--command-timeout", type=_positive(float), default=10.0,
                   help="seconds for some broker to accept a connection (default 10)")
    p.add_argument("--json", action="store_true",
                   help="print the summary as JSON (one object) instead of the table")
    return p


def list_faults() -> str:
    return "\n".join(f"{name}: {kind.summary}" for name, kind in sorted(fault_kinds().items()))


class Run:
    """One strom-verify run with parsed arguments."""

    def __init__(self, args: argparse.Namespace, err: Callable[[str], None]):
        self.args = args
        self.say = err
        self.faults = [f.strip() for f in args.faults.split(",") if f.strip()]
        self.idempotence = args.acks in ("all", "-1") if args.idempotence is None else args.idempotence
        self.topic = args.topic or f"strom-verify-{uuid.uuid4().hex[:8]}"
        self.client_config: dict[str, Any] = {}
        if args.command_config:
            self.client_config = {k: p.value.strip()
                                  for k, p in read_properties(args.command_config).items()}

    def producer_config(self) -> dict[str, Any]:
        config = dict(self.client_config)
        config.update(dict(self.args.producer_property))
        config["acks"] = self.args.acks
        config["enable.idempotence"] = self.idempotence
        return config

    def execute(self) -> tuple[summary.RunFacts, Checker]:
        a = self.args
        if a.netns_cluster:
            with self._netns_cluster() as hosts:
                return self._against(hosts.bootstrap, hosts.processes, hosts)
        cluster = None
        if self.faults:
            try:
                cluster = open_cluster(a.cluster_dir)
            except ClusterError as e:
                raise CouldNotRun(str(e)) from None
        return self._against(a.bootstrap_server, cluster, None)

    @contextlib.contextmanager
    def _netns_cluster(self) -> Iterator[NetnsCluster]:
        """The cluster of --netns-cluster, removed on the way out (SIGTERM and SIGHUP are
        turned into a KeyboardInterrupt meanwhile, so that they remove it too)."""
        a = self.args
        reason = unavailable_reason()
        if reason:
            raise CouldNotRun(f"--netns-cluster: {reason}")
        previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
        try:
            try:
                hosts = NetnsCluster.start(a.netns_cluster, a.data_dir, dict(a.broker_property),
                                           self.say)
            except (NetnsUnavailable, ZooKeeperUnavailable, ValueError) as e:
                raise CouldNotRun(f"--netns-cluster: {e}") from None
            except (ClusterError, RuntimeError, TimeoutError) as e:
                raise CouldNotRun(f"--netns-cluster did not start: {describe_error(e)}") from None
            try:
                yield hosts
            finally:
                hosts.close()
                self.say("netns cluster stopped and its namespaces removed"
                         + (f" (data kept in {hosts.directory})" if hosts.keep_data else ""))
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _against(self, bootstrap: str, cluster: LocalCluster | None,
                 hosts: NetnsCluster | None) -> tuple[summary.RunFacts, Checker]:
        try:
            wait_reachable(bootstrap, self.args.command_timeout)
        except CliError as e:
            raise CouldNotRun(e.message) from None
        view = ClusterView(bootstrap, self.topic, self.client_config)
        try:
            return self._with_view(bootstrap, view, cluster, hosts)
        finally:
            view.close()

    def _with_view(self, bootstrap: str, view: ClusterView, cluster: LocalCluster | None,
                   hosts: NetnsCluster | None) -> tuple[summary.RunFacts, Checker]:
        a = self.args
        configs = {"min.insync.replicas": str(a.min_insync_replicas), **dict(a.topic_config)}
        try:
            created = view.ensure_topic(a.partitions, a.replication_factor, configs)
            view.until(f"topic {self.topic} with every replica in sync", view.in_sync,
                       a.ready_timeout)
            partitions = len(view.partitions())
        except (*TRANSIENT, TimeoutError) as e:
            raise CouldNotRun(f"topic {self.topic} not ready: {describe_error(e)}") from None
        self.say(f"topic {self.topic}: {partitions} partitions"
                 f"{' (created)' if created else ' (existing)'}, every replica in sync")

        facts = summary.RunFacts(topic=self.topic, partitions=partitions, acks=a.acks,
                                 idempotence=self.idempotence, rate=a.rate, duration=a.duration)
        checker = Checker()
        schedule = None
        if cluster is not None:
            ctx = FaultContext(cluster=cluster, view=view, rng=random.Random(a.seed), log=self.say,
                               network=hosts)
            schedule = FaultSchedule(self.faults, ctx, a.fault_interval, a.fault_duration)
        producer = RateProducer(bootstrap, self.topic, checker,
                                f"v{uuid.uuid4().hex[:8]}", a.rate, self.producer_config())
        stop = threading.Event()
        producer.start()
        ticker = threading.Thread(target=self._progress, args=(producer, stop), daemon=True)
        ticker.start()
        finished = False
        producing = time.monotonic()
        try:
            deadline = producing + a.duration
            if schedule is not None:
                try:
                    schedule.run(deadline, stop, a.fault_rounds)
                except (ClusterError, *TRANSIENT, TimeoutError, RuntimeError) as e:
                    raise CouldNotRun(f"a fault could not be done or healed: "
                                      f"{describe_error(e)}") from None
            stop.wait(max(0.0, deadline - time.monotonic()))
            finished = True
        finally:
            stop.set()
            facts.duration = round(time.monotonic() - producing, 1)
            if schedule is not None:
                facts.faults = schedule.done
                facts.fault_log = schedule.lines
                if not finished:            # broke off: no broker stays frozen or dead
                    schedule.heal_all()
            producer.stop(a.flush_timeout)
        sent, acked, failed = producer.progress()
        self.say(f"produced: {sent} sent, {acked} acknowledged, {failed} failed"
                 + (f" ({dict(producer.errors)})" if producer.errors else "")
                 + "; reading back")
        try:
            started = time.monotonic()
            read = read_back(bootstrap, self.topic, checker, timeout=a.read_timeout,
                             config=self.client_config)
        except (*TRANSIENT, TimeoutError) as e:
            raise CouldNotRun(describe_error(e)) from None
        self.say(f"read back {sum(read.values())} records in {time.monotonic() - started:.1f}s")
        return facts, checker

    def _progress(self, producer: RateProducer, stop: threading.Event) -> None:
        started = time.monotonic()
        while not stop.wait(PROGRESS_EVERY):
            sent, acked, failed = producer.progress()
            self.say(f"t={time.monotonic() - started:6.1f}s sent {sent}, acknowledged {acked}, "
                     f"failed {failed}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_faults:
        print(list_faults())
        return 0
    usage_error = _usage_error(args)
    if usage_error:
        parser.error(usage_error)

    def err(line: str) -> None:
        print(f"[{PROG}] {line}", file=sys.stderr, flush=True)

    try:
        run = Run(args, err)
        facts, checker = run.execute()
    except CouldNotRun as e:
        return _could_not_run(str(e), args.json)
    except (ConfigError, OSError) as e:
        return _could_not_run(describe_error(e), args.json)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - a tool ends in one line, never a traceback
        if os.environ.get("STROM_CLI_DEBUG"):
            traceback.print_exc()
        return _could_not_run(f"unexpected {type(e).__name__}: {describe_error(e)}", args.json)
    report = checker.report()
    print(summary.as_json(report, facts) if args.json else summary.table(report, facts))
    return summary.exit_code(report, facts)


def _usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments' combination, if anything."""
    netns = args.netns_cluster is not None
    if not args.bootstrap_server and not netns:
        return "the following arguments are required: --bootstrap-server (or --netns-cluster N)"
    if args.idempotence and args.acks not in ("all", "-1"):
        return "--idempotence needs --acks all (Kafka's rule for enable.idempotence)"
    if netns and (args.bootstrap_server or args.cluster_dir is not None):
        return "--netns-cluster starts the cluster it checks: no --bootstrap-server or --cluster-dir"
    if not netns and (args.data_dir is not None or args.broker_property):
        return "--data-dir and --broker-property are for --netns-cluster"
    if args.faults and args.cluster_dir is None and not netns:
        return "--faults needs --cluster-dir (the local cluster to act on) or --netns-cluster N"
    kinds = fault_kinds()
    asked = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = [f for f in asked if f not in kinds]
    if unknown:
        return f"unknown fault kind(s): {', '.join(unknown)} (see --list-faults)"
    partitions = [f for f in asked if kinds[f].needs_network]
    if partitions and not netns:
        return (f"fault kind(s) {', '.join(dict.fromkeys(partitions))} need --netns-cluster N: "
                f"partitions cut a network of namespaces, and brokers sharing 127.0.0.1 cannot "
                f"be cut apart")
    return None


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _could_not_run(reason: str, as_json: bool) -> int:
    print(f"{PROG}: could not run: {reason}", file=sys.stderr)
    if as_json:
        print(summary.could_not_run_json(reason))
    return summary.COULD_NOT_RUN


if __name__ == "__main__":
    sys.exit(main())
