"""faust_eos.credentials: one set of librdkafka settings for Faust's clients and the layer's."""
from types import SimpleNamespace

import faust
import pytest
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth
from yarl import URL

import faust_eos
from faust_eos.security import client_settings, librdkafka_client
from tools.broker_security import make_ca

SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "team",
         "sasl.password": "hunter2"}


def conf(credentials=None, ssl_context=None, broker="eos://kafka-1:9093;kafka-2"):
    return SimpleNamespace(broker_credentials=credentials, ssl_context=ssl_context,
                           broker=[URL(f"eos://{host}") for host in broker[len("eos://"):].split(";")])


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory):
    return str(make_ca(tmp_path_factory.mktemp("ca")))


def test_plaintext_needs_no_credentials_and_adds_nothing():
    assert faust_eos.credentials({}) is None
    assert faust_eos.credentials({"security.protocol": "PLAINTEXT"}) is None
    assert librdkafka_client(conf()) == {"bootstrap.servers": "kafka-1:9093,kafka-2:9092"}


def test_sasl_ssl_reaches_aiokafka_and_the_layer_alike(ca_file):
    settings = {**SCRAM, "ssl.ca.location": ca_file}
    credentials = faust_eos.credentials(settings)

    aiokafka = credentials_to_aiokafka_auth(credentials)
    assert (aiokafka["security_protocol"], aiokafka["sasl_mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (aiokafka["sasl_plain_username"], aiokafka["sasl_plain_password"]) == ("team", "hunter2")
    assert aiokafka["ssl_context"].check_hostname
    assert client_settings(conf(credentials)) == settings
    assert "hunter2" not in repr(credentials)


def test_mutual_tls_and_switched_off_hostname_checks_reach_aiokafka(ca_file):
    credentials = faust_eos.credentials({"security.protocol": "SSL", "ssl.ca.location": ca_file,
                                         "ssl.endpoint.identification.algorithm": "none"})
    aiokafka = credentials_to_aiokafka_auth(credentials)
    assert aiokafka["security_protocol"] == "SSL" and not aiokafka["ssl_context"].check_hostname
    assert client_settings(conf(credentials))["ssl.ca.location"] == ca_file


def test_fausts_own_sasl_credentials_without_tls_are_translated():
    credentials = faust.SASLCredentials(username="team", password="hunter2", mechanism="SCRAM-SHA-256")
    assert client_settings(conf(credentials)) == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "team", "sasl.password": "hunter2"}


def test_an_ssl_context_librdkafka_cannot_use_is_refused_with_the_way_out(ca_file):
    context = faust_eos.credentials({"security.protocol": "SSL", "ssl.ca.location": ca_file}).context
    for given in (conf(faust.SSLCredentials(context)), conf(ssl_context=context),
                  conf(faust.SASLCredentials(username="u", password="p", ssl_context=context))):
        with pytest.raises(faust_eos.SettingRefused, match=r"build them with faust_eos.credentials\("):
            client_settings(given)


@pytest.mark.parametrize("settings, message", [
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": "p"},
     "sasl.mechanism='GSSAPI' is not one of"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "needs sasl.username and sasl.password"),
    ({"security.protocol": "TLS"}, "security.protocol='TLS' is not one of"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "/k.p12"}, "does not know ssl.keystore.location"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/no/such/ca.pem"}, "cannot load the TLS files"),
])
def test_settings_it_cannot_honour_are_refused_in_one_line(settings, message):
    with pytest.raises(faust_eos.SettingRefused, match=message.replace("(", r"\(")):
        faust_eos.credentials(settings)
