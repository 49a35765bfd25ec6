"""Read `template.yaml` and turn it into plain CloudFormation offline, as `sam package` + the
`AWS::Serverless-2016-10-31` transform would.

- :func:`load_template` parses the SAM template, CloudFormation short tags (`!Ref`, `!Sub`,
  `!GetAtt`, `!If`, ...) included, into plain dicts in their long form (`{"Ref": ...}`,
  `{"Fn::GetAtt": [logical_id, attribute]}`, ...).
- :func:`package` does what `sam package` does to local paths: a function's local `CodeUri`
  becomes an S3 URI, a state machine's local `DefinitionUri` is inlined as `Definition`
  (`DefinitionSubstitutions` stay, CloudFormation applies them).
- :func:`transform` packages, then runs aws-sam-translator without any AWS call (the region comes
  from a `boto3.Session(region_name=...)`, nothing else is looked up).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import boto3
import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_PATH = PROJECT_ROOT / "template.yaml"
# Where a packaged local CodeUri points; the sandbox's runtime imports handlers from the source
# tree, so the object itself never needs to exist.
DEFAULT_CODE_URI = "s3://pipeops-sandbox-artifacts/code.zip"

# Short tags whose long form is `Fn::<Name>`; the others are handled one by one below.
_FN_TAGS = (
    "And", "Base64", "Cidr", "Equals", "FindInMap", "GetAZs", "If", "ImportValue", "Join",
    "Length", "Not", "Or", "Select", "Split", "Sub", "ToJsonString", "Transform",
)


class TemplateError(Exception):
    """The template cannot be read or packaged."""


class CfnLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
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


def _fn_constructor(name: str):
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


def _is_local(uri: Any) -> bool:
    return isinstance(uri, str) and "://" not in uri


def package(
    template: Mapping[str, Any],
    *,
    base_dir: Path | str = PROJECT_ROOT,
    code_uri: str = DEFAULT_CODE_URI,
) -> dict[str, Any]:
    """A copy of `template` with local artifact paths replaced, as `sam package` would.

    Local `CodeUri` values (in `Globals.Function` and on each function) become `code_uri`; a
    local `DefinitionUri` of a state machine is read from `base_dir` and inlined as `Definition`.
    """
    packaged = copy.deepcopy(dict(template))
    base = Path(base_dir)
    global_function = packaged.get("Globals", {}).get("Function", {})
    if _is_local(global_function.get("CodeUri")):
        global_function["CodeUri"] = code_uri
    for logical_id, resource in packaged["Resources"].items():
        properties = resource.get("Properties", {})
        if resource.get("Type") == "AWS::Serverless::Function" and _is_local(properties.get("CodeUri")):
            properties["CodeUri"] = code_uri
        if resource.get("Type") == "AWS::Serverless::StateMachine" and _is_local(
            properties.get("DefinitionUri")
        ):
            definition_path = base / properties.pop("DefinitionUri")
            try:
                properties["Definition"] = json.loads(definition_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise TemplateError(
                    f"{logical_id}: cannot inline DefinitionUri {definition_path}: {exc}"
                ) from exc
    return packaged


def transform(
    template: Mapping[str, Any],
    region: str,
    *,
    parameters: Mapping[str, Any] | None = None,
    base_dir: Path | str = PROJECT_ROOT,
    code_uri: str = DEFAULT_CODE_URI,
) -> dict[str, Any]:
    """The plain CloudFormation that the SAM transform makes of `template` in `region`.

    `parameters` override parameter defaults where the transform resolves them (it leaves most
    `Ref`s to CloudFormation). The input is not modified. No AWS call is made.
    """
    # Imported here: aws-sam-translator is heavy and only needed when transforming.
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    packaged = package(template, base_dir=base_dir, code_uri=code_uri)
    session = boto3.Session(region_name=region)
    translator = Translator(managed_policy_map=None, sam_parser=Parser(), boto_session=session)
    try:
        translated = translator.translate(
            sam_template=packaged,
            parameter_values=dict(parameters or {}),
            get_managed_policy_map=_no_managed_policy_lookup,
        )
    except InvalidDocumentException as exc:
        causes = "; ".join(str(cause) for cause in exc.causes)
        raise TemplateError(f"SAM transform failed: {causes}") from exc
    for resource in translated["Resources"].values():
        if resource["Type"] == "AWS::StepFunctions::StateMachine":
            _collapse_definition_string(resource["Properties"])
    return translated


def _collapse_definition_string(properties: dict[str, Any]) -> None:
    """SAM writes an inline `Definition` as `Fn::Join` of its JSON lines, so that intrinsics can sit
    among them. Without intrinsics that join is just a string: store it as one (what CloudFormation
    would compute; it also keeps cfn-lint from recursing once per line of a long definition)."""
    definition = properties.get("DefinitionString")
    if isinstance(definition, dict) and set(definition) == {"Fn::Join"}:
        separator, parts = definition["Fn::Join"]
        if all(isinstance(part, str) for part in parts):
            properties["DefinitionString"] = separator.join(parts)


def _no_managed_policy_lookup() -> dict[str, str]:
    # Called only for managed policies named without an ARN; the template uses none, and the
    # sandbox must not call IAM to resolve them.
    return {}
