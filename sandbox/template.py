"""Turn `template.yaml` into plain CloudFormation offline, as `sam package` + the
`AWS::Serverless-2016-10-31` transform would (reading it is stack/template.py's).

- :func:`package` does what `sam package` does to local paths: a function's local `CodeUri`
  becomes an S3 URI, a state machine's local `DefinitionUri` is inlined as `Definition`
  (`DefinitionSubstitutions` stay, CloudFormation applies them).
- :func:`transform` packages, then runs aws-sam-translator without any AWS call (the region comes
  from a `boto3.Session(region_name=...)`, nothing else is looked up).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import boto3

from stack.template import PROJECT_ROOT, TemplateError

# Where a packaged local CodeUri points; the sandbox's runtime imports handlers from the source
# tree, so the object itself never needs to exist.
DEFAULT_CODE_URI = "s3://pipeops-sandbox-artifacts/code.zip"


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
