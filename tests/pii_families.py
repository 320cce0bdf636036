"""Fake credentials of every family the pii stage documents, in their real formats (the
charset and length each provider uses) and never real ones: each holds FAKE or EXAMPLE
where its charset allows. `FAMILIES[name](rng)` gives (the text written, the secret in
it); the secret is what must not be left readable, not even a piece of it."""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
UPPER = string.ascii_uppercase + string.digits
BASE64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"


def _run(rng: random.Random, charset: str, length: int, mark: str = "") -> str:
    """`length` characters of `charset` with `mark` somewhere in them."""
    chars = [rng.choice(charset) for _ in range(length - len(mark))]
    at = rng.randrange(len(chars) + 1)
    return "".join(chars[:at]) + mark + "".join(chars[at:])


def _plain(make: Callable[[random.Random], str]) -> Callable[[random.Random], tuple[str, str]]:
    """A family whose whole text is the secret."""

    def family(rng: random.Random) -> tuple[str, str]:
        value = make(rng)
        return value, value

    return family


def _aws_secret(rng: random.Random) -> tuple[str, str]:
    key = _run(rng, BASE64, 40, "FAKE")
    form = rng.choice(
        [
            "aws_secret_access_key = {}",
            'aws_secret_access_key = "{}"',
            "AWS_SECRET_ACCESS_KEY={}",
            "export AWS_SECRET_ACCESS_KEY='{}'",
            '"aws_secret_access_key": "{}"',
            "aws_secret_access_key: {}",
        ]
    )
    return form.format(key), key


def _azure(rng: random.Random) -> tuple[str, str]:
    key = _run(rng, BASE64, 86, "FAKE") + "=="
    text = (
        "DefaultEndpointsProtocol=https;AccountName=fakeaccount;"
        f"AccountKey={key};EndpointSuffix=core.windows.net"
    )
    return text, key


def _github_pat(rng: random.Random) -> str:
    return f"github_pat_{_run(rng, UPPER, 22, 'FAKE')}_{_run(rng, ALNUM, 59)}"


def _slack(rng: random.Random) -> str:
    digits = string.digits
    kind = rng.choice(["xoxb", "xoxp", "xoxa", "xoxs", "xapp"])
    if kind == "xapp":
        return f"xapp-1-A0{_run(rng, UPPER, 9)}-{_run(rng, digits, 13)}-{_run(rng, HEX, 64)}"
    middle = f"{_run(rng, digits, 12)}-{_run(rng, digits, 13)}"
    if kind == "xoxp":
        return f"xoxp-{middle}-{_run(rng, digits, 13)}-{_run(rng, HEX, 32)}"
    return f"{kind}-{middle}-{_run(rng, ALNUM, 24, 'FAKE')}"


def _jwt(rng: random.Random) -> str:
    def encoded(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    header = encoded(b'{"alg":"HS256","typ":"JWT"}')
    payload = encoded(f'{{"sub":"{rng.randrange(10**9)}","name":"Fake User"}}'.encode())
    return f"{header}.{payload}.{_run(rng, URLSAFE, 43)}"


def _pem(rng: random.Random) -> tuple[str, str]:
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY"])
    body = "\n".join(_run(rng, BASE64, 64, "FAKE" if i == 0 else "") for i in range(5))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body


def _connection(rng: random.Random) -> tuple[str, str]:
    password = _run(rng, ALNUM, 16, "Fake")
    form = rng.choice(
        [
            "postgres://app_user:{}@db.internal.example.com:5432/orders",
            "postgresql://admin:{}@10.0.0.12/analytics",
            "mongodb+srv://svc:{}@cluster0.abcde.mongodb.net/prod?retryWrites=true",
            "mysql://root:{}@localhost:3306/shop",
            "redis://:{}@cache.example.org:6379/0",
            "amqp://guest:{}@rabbit.example.com:5672/",
        ]
    )
    return form.format(password), password


def _assignment(rng: random.Random) -> tuple[str, str]:
    value = _run(rng, ALNUM + "!#%&*+", 14, "F4ke")
    form = rng.choice(
        [
            'password = "{}"',
            "DB_PASSWORD={}",
            "password: {}",
            '"api_key": "{}"',
            "api_key='{}'",
            "client_secret = {}",
            "SECRET_KEY={}",
            "token: {}",
            '{{"password": "{}"}}',
        ]
    )
    return form.format(value), value


FAMILIES: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "aws_access_key_id": _plain(lambda r: "AKIA" + _run(r, UPPER, 16, "FAKE")),
    "aws_secret_access_key": _aws_secret,
    "google_api_key": _plain(lambda r: "AIza" + _run(r, URLSAFE, 35, "FAKE")),
    "gcp_oauth_secret": _plain(lambda r: "GOCSPX-" + _run(r, URLSAFE, 28, "FAKE")),
    "azure_storage_key": _azure,
    "github": _plain(
        lambda r: r.choice(["ghp", "gho", "ghu", "ghs", "ghr"]) + "_" + _run(r, ALNUM, 36, "FAKE")
    ),
    "github_pat": _plain(_github_pat),
    "gitlab": _plain(lambda r: "glpat-" + _run(r, URLSAFE, 20, "FAKE")),
    "slack": _plain(_slack),
    "slack_webhook": _plain(
        lambda r: (
            "https://hooks.slack.com/services/T"
            + _run(r, UPPER, 8)
            + "/B"
            + _run(r, UPPER, 8)
            + "/"
            + _run(r, ALNUM, 24, "FAKE")
        )
    ),
    "stripe": _plain(
        lambda r: (
            r.choice(["sk", "rk", "pk"]) + "_live_" + _run(r, ALNUM, r.randrange(24, 100), "FAKE")
        )
    ),
    "openai": _plain(
        lambda r: r.choice(
            ["sk-" + _run(r, ALNUM, 48, "FAKE"), "sk-proj-" + _run(r, URLSAFE, 120, "FAKE")]
        )
    ),
    "anthropic": _plain(lambda r: "sk-ant-api03-" + _run(r, URLSAFE, 93, "FAKE") + "AA"),
    "huggingface": _plain(lambda r: "hf_" + _run(r, ALNUM, 34, "FAKE")),
    "twilio": _plain(lambda r: r.choice(["AC", "SK"]) + _run(r, HEX, 32)),
    "sendgrid": _plain(lambda r: f"SG.{_run(r, URLSAFE, 22, 'FAKE')}.{_run(r, URLSAFE, 43)}"),
    "jwt": _plain(_jwt),
    "private_key": _pem,
    "connection_string": _connection,
    "secret_assignment": _assignment,
}
"""Every secret family the pii stage documents, by name."""
