"""sandbox.clients.ClientCache: one marked client per (service, region), made once."""

from __future__ import annotations

from sandbox.clients import INTERNAL_USER_AGENT, ClientCache


def test_one_client_per_service_and_region_marked_as_the_sandbox_s_own(aws_env: None) -> None:
    cache = ClientCache("us-east-1", None)
    sqs = cache.client("sqs")
    assert cache.client("sqs") is sqs and cache.client("sqs", "us-east-1") is sqs
    elsewhere = cache.client("sqs", "eu-west-1")
    assert elsewhere is not sqs and elsewhere.meta.region_name == "eu-west-1"
    assert INTERNAL_USER_AGENT in sqs.meta.config.user_agent_extra
