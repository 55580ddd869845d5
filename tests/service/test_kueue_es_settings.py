"""kueue-es settings: YAML file, KUEUE_ES_* environment, flags; errors name the setting and its source."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from connectors.kafka.settings import KafkaSettings, client_kwargs, parse_url
from events.errors import InvalidInput
from kueue_es import config
from kueue_es.cli import main


def write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "kueue-es.yaml"
    p.write_text(text)
    return str(p)


def test_defaults_are_the_embedded_log() -> None:
    s = config.load(None, env={})
    assert s.log == "" and not s.uses_kafka
    assert s.kafka == KafkaSettings() and s.scheduler.ticks


def test_file_then_environment_then_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, "log: kafka://a:9092/t1\nkafka:\n  session_timeout_ms: 7000\n  topic: ignored\n"
                           "scheduler:\n  ticks: false\n")
    env = {"KUEUE_ES_KAFKA_SESSION_TIMEOUT_MS": "8000", "KUEUE_ES_KAFKA_SASL_PASSWORD": "pw",
           "KUEUE_ES_SCHEDULER_SNAPSHOT_EVERY_EVENTS": "10", "KUEUE_ES_CACHE": "/tmp/not-a-setting"}
    s = config.load(path, env=env, overrides={"log": "kafka://b:1,c:2/t2"})
    assert s.log == "kafka://b:1,c:2/t2"
    assert s.kafka.session_timeout_ms == 8000 and s.kafka.sasl.password == "pw"
    assert s.scheduler.snapshot_every_events == 10 and s.scheduler.ticks is False
    kafka, shard = parse_url(s.log, s.kafka)
    assert kafka.bootstrap == "b:1,c:2" and kafka.topic == "t2" and shard == 0
    assert kafka.session_timeout_ms == 8000


def test_offsets_commit_interval_reaches_the_service() -> None:
    from kueue_es.service import options

    assert options(config.load(None, env={})).offsets_interval_s == 0.1  # Kafka Streams' EOS commit interval
    s = config.load(None, env={"KUEUE_ES_SCHEDULER_OFFSETS_COMMIT_INTERVAL_MS": "0"})
    assert options(s).offsets_interval_s == 0


def test_config_file_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "kafka: {bootstrap: 'k:9092'}\n")
    assert config.load(None, env={"KUEUE_ES_CONFIG": path}).kafka.bootstrap == "k:9092"


@pytest.mark.parametrize(("text", "env", "message"), [
    ("kafka:\n  session_timeout_ms: soon\n", {},
     "kueue-es.yaml: $.kafka.session_timeout_ms: Expected `int`, got `str`"),
    ("kafka:\n  tls: {cafile: x}\n", {}, "kueue-es.yaml: $.kafka.tls.cafile: unknown setting"),
    ("kafka:\n  security_protocol: TLS\n", {}, "$.kafka.security_protocol: Invalid enum value 'TLS'"),
    ("", {"KUEUE_ES_KAFKA_HEARTBEAT_INTERVAL_MS": "often"},
     "KUEUE_ES_KAFKA_HEARTBEAT_INTERVAL_MS ($.kafka.heartbeat_interval_ms): Expected `int`"),
    ("", {"KUEUE_ES_KAFKA_BOOTSTRAPP": "x:1"}, "KUEUE_ES_KAFKA_BOOTSTRAPP: no such setting (under $.kafka:"),
    ("log: kafka://a:1/t\nkafka:\n  security_protocol: SASL_SSL\n", {}, "$.kafka.sasl.username: required"),
    ("kafka: {bootstrap: 'nohost'}\n", {}, "kueue-es.yaml: $.kafka.bootstrap: 'nohost' is not host:port"),
    ("", {"KUEUE_ES_KAFKA_BOOTSTRAP": "a:1", "KUEUE_ES_KAFKA_SHARDS": "0"},
     "KUEUE_ES_KAFKA_SHARDS ($.kafka.shards): must be at least 1"),
    ("scheduler: {offsets_commit_interval_ms: -1}\n", {},
     "kueue-es.yaml: $.scheduler.offsets_commit_interval_ms: must not be negative"),
    ("kafka: {static_membership: true, bootstrap: 'a:1'}\n", {}, "$.scheduler.instance_id: kafka.static_membership"),
    ("- a\n", {}, "kueue-es.yaml: $: expected a mapping"),
    ("kafka: [\n", {}, "kueue-es.yaml: line 2: not valid YAML"),
])
def test_errors_name_the_setting(tmp_path: Path, text: str, env: dict[str, str], message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InvalidInput) as info:
        config.load(path, env=env)
    assert message in str(info.value)


@pytest.mark.parametrize(("url", "message"), [
    ("kafka:///topic", "no broker address"),
    ("kafka://a:1/t/x", "the path must be one topic name"),
    ("kafka://a:1/t?partition=2", "unknown URL parameter 'partition'"),
    ("kafka://a:1/t?shard=x", "shard must be a number"),
    ("kafka://a:1/bad topic", "is not a valid topic name"),
])
def test_bad_log_urls(url: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_url(url)


def test_url_shard_and_default_topic() -> None:
    s, shard = parse_url("kafka://a:1,b:2/?shard=3")
    assert (s.bootstrap, s.topic, shard) == ("a:1,b:2", "kueue-es.log", 3)
    assert s.snapshots == "kueue-es.log.snapshots"
    assert s.transactional_id(3) == "kueue-es-scheduler.kueue-es.log.3"


def test_client_kwargs_for_sasl_over_tls(tmp_path: Path) -> None:
    cafile = ssl.get_default_verify_paths().cafile
    if not cafile or not Path(cafile).exists():
        pytest.skip("no system CA bundle to load")
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    s = config.load(None, env={
        "KUEUE_ES_LOG": "kafka://k1:9093,k2:9093/kueue-es.log",
        "KUEUE_ES_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KUEUE_ES_KAFKA_TLS_CA_FILE": cafile,
        "KUEUE_ES_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KUEUE_ES_KAFKA_SASL_USERNAME": "kueue",
        "KUEUE_ES_KAFKA_SASL_PASSWORD_FILE": str(pw),
    })
    kw = client_kwargs(parse_url(s.log, s.kafka)[0])
    assert kw["bootstrap_servers"] == ["k1:9093", "k2:9093"]
    assert kw["security_protocol"] == "SASL_SSL" and kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("kueue", "s3cret")
    assert isinstance(kw["ssl_context"], ssl.SSLContext) and kw["ssl_context"].check_hostname


def test_tls_files_need_a_tls_protocol() -> None:
    with pytest.raises(InvalidInput, match="security_protocol is PLAINTEXT"):
        config.load(None, env={"KUEUE_ES_KAFKA_BOOTSTRAP": "a:1", "KUEUE_ES_KAFKA_TLS_CA_FILE": "/x"})


def test_cli_exits_2_on_bad_settings(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("KUEUE_ES_CONFIG", raising=False)
    path = write(tmp_path, "kafka:\n  session_timeout_ms: soon\n")
    assert main(["run", "--config", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kueue-es: error: ") and "$.kafka.session_timeout_ms" in err
    assert main(["run", "--log", "kafka://nohost/t"]) == 2
    assert "$.kafka.bootstrap" in capsys.readouterr().err
