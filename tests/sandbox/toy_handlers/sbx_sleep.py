"""Toy handler: sleeps for event["seconds"] real seconds, printing before and after."""

import time


def handler(event, context):
    print("going to sleep")
    time.sleep(float(event.get("seconds", 1)))
    print("woke up LATE")
    return {"slept": event.get("seconds", 1)}
