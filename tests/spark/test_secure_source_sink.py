"""The PySpark source and sink pass `kafka.`-prefixed security options to strom's clients, as
Spark's Kafka connector does: a batch write and read over SASL_SSL with SCRAM-SHA-512, with
ACLs on; a wrong password fails the read with the authentication error."""
from __future__ import annotations

import pytest

from clients import AdminClient, NewTopic
from clients.admin import AclBinding, ScramMechanism, UserScramCredentialUpsertion
from clients.protocol.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.support.broker_process import BrokerProcess
from tests.support.security import SecurityKit, client_config, secure_overrides


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    d = tmp_path_factory.mktemp("spark-secure")
    kit = SecurityKit(d / "kit")
    b = BrokerProcess(d / "b", overrides=secure_overrides(kit, {"SASL_SSL": "{port}"},
                                                          acls=True)).start()
    admin_conf = client_config(kit, "SASL_SSL", b.bootstrap, user="admin")
    with AdminClient(admin_conf) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "alice", ScramMechanism.SCRAM_SHA_512, 4096, "alice-secret")])
    yield kit, b, admin_conf
    b.stop()


def _options(kit, bootstrap: str) -> dict[str, str]:
    conf = client_config(kit, "SASL_SSL", bootstrap, mechanism="SCRAM-SHA-512")
    return {f"kafka.{k}": v for k, v in conf.items()}


def _allow_alice(admin_conf, topic: str) -> None:
    """Read/Write on the topic, Read on every group (Spark's reader commits nothing, but
    the planner may look offsets up)."""
    allow = [AclBinding(rtype, name, PatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
             for rtype, name, ops in ((ResourceType.TOPIC, topic, (AclOperation.READ, AclOperation.WRITE)),
                                      (ResourceType.GROUP, "*", (AclOperation.READ,)))
             for op in ops]
    with AdminClient(admin_conf) as admin:
        admin.create_acls(allow)


def test_batch_write_and_read_over_sasl_ssl_with_scram(spark, secure):
    kit, b, admin_conf = secure
    topic = "secure-batch"
    with AdminClient(admin_conf) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    _allow_alice(admin_conf, topic)
    opts = _options(kit, b.bootstrap)
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(40)], "key string, value string")
    df.write.format("strom").options(**opts).option("topic", topic).mode("append").save()
    back = spark.read.format("strom").options(**opts).option("subscribe", topic).load()
    got = sorted((bytes(r["key"]), bytes(r["value"])) for r in back.collect())
    assert got == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(40))


def test_a_wrong_password_fails_the_read(spark, secure):
    kit, b, _ = secure
    opts = {**_options(kit, b.bootstrap), "kafka.sasl.password": "wrong"}
    with pytest.raises(Exception, match="(?i)authentication"):
        spark.read.format("strom").options(**opts).option("subscribe", "secure-batch").load().collect()
