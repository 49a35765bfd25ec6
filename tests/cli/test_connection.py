"""Where the CLI connects: profile and region resolved with the `aws` CLI's precedence.

Checked against botocore's own resolution (a session for the profile, its `region_name`) in a
config file of our own, plus the one rule botocore does not carry and the aws CLI v2 documents:
AWS_REGION wins over AWS_DEFAULT_REGION and the profile's region, and --region over everything.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from stack.resources import BadConnectionError, Connection

CONFIG = """\
[default]
region = ap-south-1

[profile eu]
region = eu-west-1

[profile bare]
output = json
"""
CREDENTIALS = """\
[default]
aws_access_key_id = DEFAULTKEY
aws_secret_access_key = x

[eu]
aws_access_key_id = EUKEY
aws_secret_access_key = x
"""


@pytest.fixture
def aws_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Only our config and credentials files; no region or profile from the environment."""
    (tmp_path / "config").write_text(CONFIG)
    (tmp_path / "credentials").write_text(CREDENTIALS)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ENVKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    return tmp_path


# (environment, --profile, what botocore's session resolves): no --region, no AWS_REGION.
BOTOCORE_CASES = {
    "the default profile's region": ({}, None),
    "AWS_PROFILE's region": ({"AWS_PROFILE": "eu"}, None),
    "--profile over AWS_PROFILE": ({"AWS_PROFILE": "bare"}, "eu"),
    "AWS_DEFAULT_REGION over the profile's region": ({"AWS_PROFILE": "eu", "AWS_DEFAULT_REGION": "us-west-2"}, None),
    "AWS_DEFAULT_REGION over --profile's region": ({"AWS_DEFAULT_REGION": "us-west-2"}, "eu"),
    "a profile without a region": ({"AWS_PROFILE": "bare"}, None),
}


@pytest.mark.parametrize("case", list(BOTOCORE_CASES))
def test_the_region_is_the_one_botocore_resolves_for_the_profile(aws_config: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    environment, profile = BOTOCORE_CASES[case]
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    botocore_says = boto3.session.Session(profile_name=profile).region_name
    connection = Connection.resolve(None, None, None, profile)
    assert connection.region == (botocore_says or "us-east-1")
    if case == "a profile without a region":
        assert botocore_says is None and connection.region_source == "the default"


def test_aws_region_and_then_the_option_win_as_in_the_aws_cli(aws_config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "eu")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_REGION", "ca-central-1")
    assert Connection.resolve(None, None, None).region == "ca-central-1"
    assert Connection.resolve(None, None, None, "eu").region == "ca-central-1"
    explicit = Connection.resolve(None, None, "sa-east-1", "eu")
    assert (explicit.region, explicit.region_source) == ("sa-east-1", "--region")


def test_a_named_profile_brings_its_credentials_as_botocore_gives_them(aws_config: Path) -> None:
    """An explicit profile's keys win over AWS_ACCESS_KEY_ID (botocore's rule, and the aws CLI's)."""
    for profile in (None, "eu"):
        ours = Connection.resolve(None, None, None, profile)._session[0].get_credentials()
        theirs = boto3.session.Session(profile_name=profile).get_credentials()
        assert ours.access_key == theirs.access_key
    assert Connection.resolve(None, None, None, "eu")._session[0].get_credentials().access_key == "EUKEY"


@pytest.mark.parametrize(
    ("environment", "arguments", "said"),
    [
        ({}, ("nope", None, None), "no AWS profile 'nope' (from --profile)"),
        ({"AWS_PROFILE": "nope"}, (None, None, None), "no AWS profile 'nope' (from the environment variable AWS_PROFILE)"),
        ({}, (None, "127.0.0.1:4566", None), "is not a URL: use e.g. http://127.0.0.1:4566"),
        ({"AWS_ENDPOINT_URL": "localhost:4566"}, (None, None, None), "(from the environment variable AWS_ENDPOINT_URL)"),
        ({}, (None, None, "eu west 1"), "region 'eu west 1' (from --region) is not a region name"),
        ({"AWS_REGION": "-x"}, (None, None, None), "(from the environment variable AWS_REGION) is not a region name"),
    ],
)
def test_what_cannot_work_is_refused_before_any_request(
    aws_config: Path, monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], arguments: tuple, said: str
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    profile, endpoint, region = arguments
    with pytest.raises(BadConnectionError) as raised:
        Connection.resolve(None, endpoint, region, profile)
    assert said in str(raised.value)
