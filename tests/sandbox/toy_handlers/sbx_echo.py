"""Toy handler: echoes the event with what the runtime gave it (context, environment)."""

import os
import time

GREETING_AT_IMPORT = os.environ.get("SBX_GREETING", "<unset>")
FUNCTION_AT_IMPORT = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "<unset>")
CALLS = 0

print("sbx_echo imported")


def handler(event, context):
    global CALLS
    CALLS += 1
    first = context.get_remaining_time_in_millis()
    time.sleep(0.02)
    second = context.get_remaining_time_in_millis()
    print(
        f"echo request={context.aws_request_id} tag={event.get('tag') if isinstance(event, dict) else None}"
    )
    return {
        "event": event,
        "calls": CALLS,
        "greeting_at_import": GREETING_AT_IMPORT,
        "function_at_import": FUNCTION_AT_IMPORT,
        "function_name": context.function_name,
        "function_version": context.function_version,
        "invoked_function_arn": context.invoked_function_arn,
        "memory_limit_in_mb": context.memory_limit_in_mb,
        "aws_request_id": context.aws_request_id,
        "log_group_name": context.log_group_name,
        "log_stream_name": context.log_stream_name,
        "remaining": [first, second],
        "region": os.environ.get("AWS_REGION"),
    }
