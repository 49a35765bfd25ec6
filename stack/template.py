"""Read `template.yaml`, the deployed stack as data, for the operator side and the sandbox.

:func:`load_template` parses the SAM template, CloudFormation short tags (`!Ref`, `!Sub`,
`!GetAtt`, `!If`, ...) included, into plain dicts in their long form (`{"Ref": ...}`,
`{"Fn::GetAtt": [logical_id, attribute]}`, ...). Turning it into plain CloudFormation (the SAM
transform) is the sandbox's business: sandbox/template.py.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_PATH = PROJECT_ROOT / "template.yaml"

# Short tags whose long form is `Fn::<Name>`; the others are handled one by one below.
_FN_TAGS = (
    "And", "Base64", "Cidr", "Equals", "FindInMap", "GetAZs", "If", "ImportValue", "Join",
    "Length", "Not", "Or", "Select", "Split", "Sub", "ToJsonString", "Transform",
)


class TemplateError(Exception):
    """The template cannot be read or packaged."""


class CfnLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # a base chosen at run time
    """A SafeLoader that understands CloudFormation's short tags.

    Dates are not resolved: CloudFormation reads `2012-10-17` as a string, and so do we. libyaml's
    parser when PyYAML has it (the same safe constructors, ~10x faster: sandbox start-up read the
    template for seconds).
    """


CfnLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]


def _fn_constructor(name: str) -> Callable[[yaml.SafeLoader, yaml.Node], dict[str, Any]]:
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        return {name: _construct(loader, node)}

    return construct


def _get_att(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
    value = _construct(loader, node)
    if isinstance(value, str):
        logical_id, _, attribute = value.partition(".")
        value = [logical_id, attribute]
    return {"Fn::GetAtt": value}


for _tag in _FN_TAGS:
    CfnLoader.add_constructor(f"!{_tag}", _fn_constructor(f"Fn::{_tag}"))
CfnLoader.add_constructor("!Ref", _fn_constructor("Ref"))
CfnLoader.add_constructor("!Condition", _fn_constructor("Condition"))
CfnLoader.add_constructor("!GetAtt", _get_att)


# (resolved path, mtime ns, size) -> the parsed template: every sandbox start reads it twice.
_LOADED: dict[tuple[str, int, int], dict[str, Any]] = {}


def load_template(path: Path | str = TEMPLATE_PATH) -> dict[str, Any]:
    """The template at `path` as plain dicts and lists, intrinsics in their long form.

    A fresh copy each call; the parse is reused while the file is unchanged (same mtime and size).
    """
    try:
        stat = os.stat(path)
        key = (str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)
        cached = _LOADED.get(key)
        if cached is not None:
            return copy.deepcopy(cached)
        with open(path, encoding="utf-8") as stream:
            template = yaml.load(stream, Loader=CfnLoader)  # a SafeLoader: no arbitrary objects
    except (OSError, yaml.YAMLError) as exc:
        raise TemplateError(f"cannot read template {path}: {exc}") from exc
    if not isinstance(template, dict) or not isinstance(template.get("Resources"), dict):
        raise TemplateError(f"{path} is not a CloudFormation template (no Resources)")
    _LOADED[key] = copy.deepcopy(template)
    return template


def functions(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The template's functions (AWS::Serverless::Function) by logical id."""
    return {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource.get("Type") == "AWS::Serverless::Function"
    }
