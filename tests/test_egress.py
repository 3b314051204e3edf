"""Where LLM endpoints may point (h2htalk/egress.py, LLM_ALLOWED_ENDPOINTS): refused on save
(model, forms, API) and again when connecting (resolved, checked and pinned per connection).

No test connects anywhere but loopback: `loopback_only` makes any other connection attempt
fail in the test itself, so a missing check shows up as a failed assertion, not as traffic."""

import ipaddress
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.urls import reverse

from h2htalk import egress, llm
from scenarios.models import CompanionModel, GenerationRun, Response
from scenarios.tasks import queue_run
from scoring.models import JudgeConfig, JudgeVerdict
from scoring.tasks import queue_judge_run
from tests.llm_server import ChatServer
from tests.scenarios import factories
from tests.scoring.test_judge_support import judge_run, response_run, scores_json

METADATA_URL = "http://169.254.169.254/latest/"
MESSAGES = [{"role": "user", "content": "hello"}]
REAL_GETADDRINFO = socket.getaddrinfo
REAL_CREATE_CONNECTION = socket.create_connection


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Connections to anything but a loopback address fail here, before any packet is sent."""

    def guarded(address, *args, **kwargs):
        host = address[0]
        try:
            outside = not ipaddress.ip_address(host).is_loopback
        except ValueError:
            outside = host != "localhost"
        if outside:
            raise OSError(f"test guard: no connection to {host!r} (loopback only)")
        return REAL_CREATE_CONNECTION(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", guarded)


@pytest.fixture
def dns(monkeypatch):
    """Fake DNS for names in `answers` (a list of addresses, or a list of such lists served
    one per lookup); literals and localhost resolve as usual, other names do not resolve."""
    answers: dict[str, list] = {}
    lookups: list[str] = []

    def fake(host, port, *args, **kwargs):
        if host in answers:
            lookups.append(host)
            served = answers[host]
            addresses = served.pop(0) if isinstance(served[0], list) else served
            return [
                (
                    socket.AF_INET6 if ":" in a else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (a, port, 0, 0) if ":" in a else (a, port),
                )
                for a in addresses
            ]
        if host != "localhost" and not _numeric(str(host)):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return REAL_GETADDRINFO(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    fake.answers, fake.lookups = answers, lookups
    return fake


def _numeric(host: str) -> bool:
    """An address literal, or a numeric IPv4 form the C library reads without DNS
    (2852039166, 0xA9FEA9FE, 0251.0376.0251.0376, 169.254.43518)."""
    try:
        ipaddress.ip_address(host.split("%")[0])
        return True
    except ValueError:
        pass
    try:
        socket.inet_aton(host)
        return True
    except OSError:
        return False


@pytest.fixture
def server():
    chat_server = ChatServer().start()
    yield chat_server
    chat_server.stop()


# ---------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        (METADATA_URL, "cloud metadata"),
        ("http://2852039166/latest/", "cloud metadata"),  # decimal
        ("http://0xA9FEA9FE/", "cloud metadata"),  # hex
        ("http://169.254.43518/", "cloud metadata"),  # short form
        ("http://[::ffff:169.254.169.254]/", "cloud metadata"),  # IPv4-mapped IPv6
        ("http://[64:ff9b::a9fe:a9fe]/", "cloud metadata"),  # NAT64
        ("http://[fd00:ec2::254]/", "cloud metadata"),
        ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata"),
        ("http://169.254.1.1:8000/v1", "link-local"),
        ("http://[fe80::1]/v1", "link-local"),
        ("http://10.0.0.5:8000/v1", "private"),
        ("http://172.16.3.4/v1", "private"),
        ("https://192.168.1.10/v1", "private"),
        ("http://[fc00::1]/v1", "private"),
        ("http://[::ffff:10.0.0.1]/v1", "private"),
        ("http://100.64.1.1/v1", "carrier-grade NAT"),
        ("http://0.0.0.0:8000/v1", "unspecified"),
        ("http://[::]:8000/v1", "unspecified"),
        ("http://224.0.0.1/", "multicast"),
        ("http://240.0.0.1/", "reserved"),
    ],
)
def test_non_public_addresses_are_refused_naming_the_rule_and_the_setting(dns, url, kind):
    with pytest.raises(egress.EgressError) as refused:
        egress.check_endpoint(url)
    message = str(refused.value)
    assert kind in message and "LLM_ALLOWED_ENDPOINTS" in message, message
    assert f"{urlsplit(url).hostname} " in message  # names the host as given
    assert "now: public, loopback" in message


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://127.0.0.1/v1", "Only http and https"),
        ("file:///etc/passwd", "Only http and https"),
        ("http://user:pw@127.0.0.1:8000/v1", "user name or password"),
        ("http://api.example.com@169.254.169.254/", "user name or password"),
        ("http://api.example.com\\@169.254.169.254/", "'\\'"),
        ("http://127.0.0.1 /v1", "whitespace"),
        ("http:///v1", "no host"),
        ("http://127.0.0.1:99999/v1", "port"),
        ("http://0251.0376.0251.0376/", "not valid"),  # octal: the client cannot parse it
        ("http://[/v1", "not valid"),
        ("http://[::1/v1", "not valid"),
    ],
)
def test_ambiguous_urls_are_refused(dns, url, why):
    with pytest.raises(egress.EgressError) as refused:
        egress.check_endpoint(url)
    assert why in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8001/v1",
        "http://127.8.9.10/v1",
        "http://localhost:11434/v1",
        "http://[::1]:8000/v1",
        "https://8.8.8.8/v1",  # a public literal (never connected to here)
        "https://api.public.test/v1",  # resolves (fake DNS) to public addresses only
        "https://not-resolving.test/v1",  # does not resolve now: checked when connecting
        "http://bücher.example:8000/v1",
    ],
)
def test_public_hosts_and_loopback_are_allowed_by_default(dns, url):
    dns.answers["api.public.test"] = ["1.1.1.1", "2606:4700:4700::1111"]
    dns.answers["xn--bcher-kva.example"] = ["1.1.1.1"]
    egress.check_endpoint(url)


def test_international_names_are_resolved_as_the_client_sends_them(dns):
    dns.answers["xn--bcher-kva.example"] = ["192.168.7.7"]
    for url in ("http://Bücher.example:8000/v1", "http://xn--bcher-kva.example:8000/v1"):
        with pytest.raises(
            egress.EgressError, match=re.escape("xn--bcher-kva.example resolves to 192")
        ):
            egress.check_endpoint(url)


def test_a_name_that_cannot_be_encoded_is_not_a_crash():
    """IDNA refuses a 70-letter label before any lookup: no address, so nothing to refuse."""
    egress.check_endpoint("http://" + "a" * 70 + ".com/v1")
    with pytest.raises(socket.gaierror):
        egress.resolve("a" * 70 + ".com", 80)


def test_every_address_of_a_name_must_be_allowed(dns):
    dns.answers["mixed.test"] = ["1.1.1.1", "10.0.0.1"]
    with pytest.raises(egress.EgressError, match=re.escape("mixed.test resolves to 10.0.0.1")):
        egress.check_endpoint("https://mixed.test/v1")


def test_the_setting_allows_listed_networks_and_names(dns, settings):
    dns.answers["vllm.internal"] = ["10.1.2.3"]
    dns.answers["gpu7.corp.example"] = ["172.20.0.7"]
    dns.answers["evil.internal"] = ["169.254.169.254"]
    with pytest.raises(egress.EgressError):
        egress.check_endpoint("http://10.0.5.7:8000/v1")
    settings.LLM_ALLOWED_ENDPOINTS = [
        "public",
        "loopback",
        "10.0.5.0/24",
        "fd12:3456::/32",
        "vllm.internal",
        "*.corp.example",
        "evil.internal",
    ]
    for url in (
        "http://10.0.5.7:8000/v1",
        "http://[fd12:3456::9]/v1",
        "http://vllm.internal:8000/v1",
        "http://gpu7.corp.example/v1",
        "http://127.0.0.1/v1",
    ):
        egress.check_endpoint(url)
    for url in ("http://10.0.6.1/v1", "http://192.168.0.2/v1", "http://other.internal/v1"):
        dns.answers["other.internal"] = ["10.9.9.9"]
        with pytest.raises(
            egress.EgressError, match=re.escape("now: public, loopback, 10.0.5.0/24")
        ):
            egress.check_endpoint(url)
    # A host-name entry never opens a metadata address: only an address entry does.
    with pytest.raises(egress.EgressError, match="cloud metadata"):
        egress.check_endpoint("http://evil.internal/")
    settings.LLM_ALLOWED_ENDPOINTS = ["169.254.169.254/32"]  # strict: only that
    egress.check_endpoint(METADATA_URL)
    for url in ("http://127.0.0.1/v1", "https://8.8.8.8/v1"):
        with pytest.raises(egress.EgressError):
            egress.check_endpoint(url)


def test_a_malformed_setting_entry_is_a_configuration_error(settings):
    settings.LLM_ALLOWED_ENDPOINTS = ["public", "10.0.0.0/33 oops"]
    with pytest.raises(
        ImproperlyConfigured, match=re.escape("LLM_ALLOWED_ENDPOINTS: '10.0.0.0/33 oops'")
    ):
        egress.check_endpoint("http://127.0.0.1/v1")


def test_a_malformed_setting_stops_start_up():
    env = {**os.environ, "SECRET_KEY": "test-only", "LLM_ALLOWED_ENDPOINTS": "public,10.0.0.0/99"}
    started = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings_module_dir(),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode != 0
    assert "LLM_ALLOWED_ENDPOINTS: '10.0.0.0/99'" in started.stderr


def settings_module_dir() -> str:
    return str(Path(__file__).resolve().parent.parent)


# ---------------------------------------------------------------- on save


@pytest.mark.django_db
def test_models_refuse_the_metadata_url_on_the_base_url_field(dns):
    companion = CompanionModel(name="c", base_url=METADATA_URL, model_id="m")
    with pytest.raises(ValidationError) as refused:
        companion.full_clean()
    assert "LLM_ALLOWED_ENDPOINTS" in str(refused.value.message_dict["base_url"])
    config = JudgeConfig(name="j", base_url="http://0xA9FEA9FE/", model_id="m", rubric="r")
    with pytest.raises(ValidationError) as refused:
        config.full_clean()
    assert "cloud metadata" in str(refused.value.message_dict["base_url"])
    CompanionModel(name="imported", provider="imported").full_clean()  # no URL: fine


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        METADATA_URL,
        "http://[::ffff:169.254.169.254]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://10.0.0.2/",
        "https://169.254.169.254.nip.test/",  # a name that resolves to the metadata address
    ],
)
def test_api_refuses_forbidden_endpoints_for_companions_and_judges(researcher_client, dns, url):
    dns.answers["169.254.169.254.nip.test"] = ["169.254.169.254"]
    response = researcher_client.post(
        "/api/companions/",
        {"name": "probe", "provider": "other", "base_url": url, "model_id": "m"},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "LLM_ALLOWED_ENDPOINTS" in response.json()["base_url"][0]
    response = researcher_client.post(
        "/api/judges/configs/",
        {"name": "probe", "mode": "single", "base_url": url, "model_id": "m", "rubric": "r"},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "LLM_ALLOWED_ENDPOINTS" in response.json()["base_url"][0]
    assert not CompanionModel.objects.exists() and not JudgeConfig.objects.exists()


@pytest.mark.django_db
def test_api_updates_are_checked_and_a_listed_network_is_allowed(researcher_client, settings, dns):
    created = researcher_client.post(
        "/api/companions/",
        {"name": "local", "base_url": "http://127.0.0.1:8001/v1", "model_id": "m"},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    url = f"/api/companions/{created.json()['id']}/"
    patched = researcher_client.patch(
        url, {"base_url": "http://10.0.5.7:8000/v1"}, content_type="application/json"
    )
    assert patched.status_code == 400 and "private" in patched.json()["base_url"][0]
    settings.LLM_ALLOWED_ENDPOINTS = ["public", "loopback", "10.0.5.0/24"]
    patched = researcher_client.patch(
        url, {"base_url": "http://10.0.5.7:8000/v1"}, content_type="application/json"
    )
    assert patched.status_code == 200, patched.content
    judge = researcher_client.post(
        "/api/judges/configs/",
        {"name": "lan judge", "base_url": "http://10.0.5.8/v1", "model_id": "m", "rubric": "r"},
        content_type="application/json",
    )
    assert judge.status_code == 201, judge.content


@pytest.mark.django_db
def test_forms_refuse_the_metadata_url_on_the_base_url_field(researcher_client, dns):
    companion = {
        "name": "probe",
        "provider": "other",
        "base_url": METADATA_URL,
        "model_id": "m",
        "params": "{}",
        "max_concurrency": 4,
        "timeout_seconds": 30,
    }
    response = researcher_client.post(reverse("companions:create"), companion)
    assert response.status_code == 200
    assert "LLM_ALLOWED_ENDPOINTS" in str(response.context["form"].errors["base_url"])
    judge = {
        "name": "probe",
        "mode": "single",
        "base_url": METADATA_URL,
        "model_id": "m",
        "rubric": "",
        "temperature": "0",
        "samples": "1",
        "params": "{}",
        "max_concurrency": "4",
        "timeout_seconds": "60",
    }
    response = researcher_client.post(reverse("judges:create"), judge)
    assert response.status_code == 200
    assert "cloud metadata" in str(response.context["form"].errors["base_url"])
    assert not CompanionModel.objects.exists() and not JudgeConfig.objects.exists()


# ---------------------------------------------------------------- on connect


def test_the_local_server_still_answers(server):
    result = llm.chat(llm.Endpoint(base_url=server.base_url, model="m", timeout=5), MESSAGES)
    assert result.text == "reply from m"


def test_a_stored_forbidden_url_is_refused_before_any_request(dns):
    endpoint = llm.Endpoint(base_url=METADATA_URL, model="m", timeout=5)
    with pytest.raises(
        llm.LLMError, match=re.escape("endpoint refused: 169.254.169.254 is a cloud")
    ) as err:
        llm.chat(endpoint, MESSAGES, sleep=lambda s: None)
    assert not err.value.retryable


@pytest.mark.parametrize(
    "url", ["http://2852039166/latest/", "http://0xA9FEA9FE/", "http://169.254.43518/"]
)
def test_numeric_forms_stored_anyhow_are_refused_when_connecting(dns, url):
    """Django's URL validator happens to refuse these on save; the client refuses them too."""
    endpoint = llm.Endpoint(base_url=url, model="m", timeout=5)
    with pytest.raises(llm.LLMError) as refused:
        llm.chat(endpoint, MESSAGES, sleep=lambda s: None)
    assert "resolves to 169.254.169.254, which is a cloud metadata address" in str(refused.value)
    assert not refused.value.retryable and refused.value.attempts == 1


def test_dns_rebinding_is_refused_at_connect_time_and_not_retried(server, dns):
    port = server.httpd.server_address[1]
    dns.answers["llm.rebind.test"] = [["127.0.0.1"], ["10.0.0.1"]]
    url = f"http://llm.rebind.test:{port}/v1"
    egress.check_endpoint(url)  # saved while it resolved to loopback
    with pytest.raises(llm.LLMError) as refused:
        llm.chat(llm.Endpoint(base_url=url, model="m", timeout=5), MESSAGES, sleep=lambda s: None)
    message = str(refused.value)
    assert "endpoint refused: llm.rebind.test resolves to 10.0.0.1" in message
    assert "private" in message and "LLM_ALLOWED_ENDPOINTS" in message
    assert not refused.value.retryable and refused.value.attempts == 1
    assert server.requests == []


def test_connections_go_to_the_checked_address(server, dns):
    """One lookup per connection, and the socket goes to that address: a second lookup (as a
    plain client would make) answers 127.0.0.2, where nothing listens."""
    port = server.httpd.server_address[1]
    dns.answers["llm.pinned.test"] = [["127.0.0.1"], ["127.0.0.2"], ["127.0.0.2"]]
    endpoint = llm.Endpoint(base_url=f"http://llm.pinned.test:{port}/v1", model="m", timeout=5)
    result = llm.chat(endpoint, MESSAGES, max_attempts=1)
    assert result.text == "reply from m"
    assert dns.lookups == ["llm.pinned.test"]


def test_redirects_are_not_followed(server):
    server.script.append("redirect:/elsewhere/chat/completions")
    endpoint = llm.Endpoint(base_url=server.base_url, model="m", timeout=5)
    with pytest.raises(llm.LLMError, match="redirects are not followed") as refused:
        llm.chat(endpoint, MESSAGES, sleep=lambda s: None)
    assert refused.value.status == 307 and not refused.value.retryable
    assert [r["path"] for r in server.requests] == ["/v1/chat/completions"]


@pytest.mark.django_db
def test_a_generation_run_records_the_refusal_on_each_response(
    server, dns, django_capture_on_commit_callbacks
):
    port = server.httpd.server_address[1]
    dns.answers["companion.rebind.test"] = ["127.0.0.1"]
    companion = CompanionModel(
        name="rebinder", base_url=f"http://companion.rebind.test:{port}/v1", model_id="m"
    )
    companion.full_clean()
    companion.save()
    dns.answers["companion.rebind.test"] = ["169.254.169.254"]  # DNS changes after the save
    run = GenerationRun.objects.create(name="rebound")
    run.scenarios.set([factories.scenario(state="approved")])
    run.companions.set([companion])
    with django_capture_on_commit_callbacks(execute=True):
        queue_run(run)
    run.refresh_from_db()
    response = Response.objects.get(run=run)
    assert response.status == Response.Status.FAILED
    assert "endpoint refused: companion.rebind.test resolves to 169.254.169.254" in response.error
    assert "cloud metadata" in response.error and response.attempts == 1
    assert "failed" in run.message and server.requests == []


@pytest.mark.django_db
def test_a_judge_run_records_the_refusal_on_each_verdict(
    server, dns, django_capture_on_commit_callbacks
):
    port = server.httpd.server_address[1]
    dns.answers["judge.rebind.test"] = ["127.0.0.1"]
    config = JudgeConfig(
        name="rebinding judge",
        base_url=f"http://judge.rebind.test:{port}/v1",
        model_id="judge",
        rubric="r",
        timeout_seconds=5,
    )
    config.full_clean()
    config.save()
    server.reply = lambda body: scores_json(6)
    dns.answers["judge.rebind.test"] = ["192.168.0.10"]
    responses, _ = response_run(["a reply"])
    run = judge_run(config, responses=list(responses.responses.all()))
    with django_capture_on_commit_callbacks(execute=True):
        queue_judge_run(run)
    verdict = JudgeVerdict.objects.get(run=run)
    assert "endpoint refused: judge.rebind.test resolves to 192.168.0.10" in verdict.error
    assert "private" in verdict.error and server.requests == []
