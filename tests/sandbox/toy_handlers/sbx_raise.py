"""Toy handler: fails with a custom exception class (Step Functions sees its bare name)."""


class PipelineRetryableError(Exception):
    pass


def handler(event, context):
    print("about to fail")
    raise PipelineRetryableError(f"cannot process {event.get('key')}")


def not_serialisable(event, context):
    return {"when": object()}
