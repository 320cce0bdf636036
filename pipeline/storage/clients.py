"""What each store's client is given so that every request it makes is bounded: the
connect and read timeouts of pipeline/storage/retry.py's `limits`, and one try per request
(the tries are retry.py's, counted and told in the error, never multiplied by the
client's own). `filesystem` in pipeline/storage/remote.py applies them to every filesystem
it makes, so no store call goes without them.

Only `s3://` has them (s3fs over aiobotocore and aiohttp); `gs://`, `az://` and `hf://`
keep their clients' own timeouts. Options set with `set_storage_options` win over these."""

from __future__ import annotations

from typing import Any

from pipeline.storage.retry import Limits

S3_SCHEMES = frozenset({"s3", "s3a"})


def client_options(scheme: str, settings: Limits) -> dict[str, Any]:
    """The fsspec options that bound the requests of `scheme`'s client by `settings`."""
    if scheme not in S3_SCHEMES:
        return {}
    from pipeline.storage.s3_session import AnsweredSession

    return {
        "config_kwargs": {
            "connect_timeout": settings.connect_timeout,
            "read_timeout": settings.read_timeout,
            "retries": {"total_max_attempts": 1},
            "http_session_cls": AnsweredSession,
        }
    }


def with_client_options(scheme: str, settings: Limits, options: dict[str, Any]) -> dict[str, Any]:
    """`options` (a user's) over `client_options`, `config_kwargs` merged key by key."""
    ours = client_options(scheme, settings)
    merged = {**ours, **options}
    if "config_kwargs" in ours and "config_kwargs" in options:
        merged["config_kwargs"] = {**ours["config_kwargs"], **options["config_kwargs"]}
    return merged


def try_once(fs: Any) -> None:
    """Make the filesystem `fs` try each request once when it retries on its own (s3fs
    does, 5 times, around the client's tries)."""
    if type(fs).__module__.startswith("s3fs") and hasattr(fs, "retries"):
        fs.retries = 1
