"""The game day's time: the sandbox's time scale and stack parameters, the waits, and where the
sandbox times something differently from AWS (said in the report, with both times)."""

from __future__ import annotations

from dataclasses import dataclass, field

# A real second is 200 virtual ones (the demo's scale): alarms written for AWS (1- and 5-minute
# periods, up to 15 of them) decide within seconds, and the reconciler's 5-minute schedule runs
# every 1.5 s, so a whole game day fits in minutes on 2 cores.
TIME_SCALE = 0.005
# The reconciler's grace for a holder with no execution: on AWS 120 s, above the router's 60 s
# timeout. In the sandbox a function may run for its real-time floor (below), so the grace stays
# above that floor in real seconds, or the reconciler could release the slot of a live router.
GRACE_REAL_SECONDS = 40
AWS_GRACE_SECONDS = 120


@dataclass(frozen=True)
class GameDaySettings:
    """How a game day runs. Waits are real seconds, generous: a busy 2-core machine slows the
    handlers, never the alarm clock, so a wait runs out only when something is really wrong."""

    short: bool = False
    time_scale: float = TIME_SCALE
    max_concurrency: int = 3
    healthy_seconds: float = 20.0
    traffic_interval: float = 2.0  # real seconds between waves in the healthy phase
    fault_traffic_interval: float = 0.5  # and while a fault acts (light waves: traffic.LIGHT_WAVE)
    calm_timeout: float = 60.0  # every alarm OK before an injection
    detect_timeout: float = 90.0  # an expected alarm in ALARM
    notify_timeout: float = 20.0  # its notification in the inbox
    absorb_virtual_seconds: float = 1200.0  # how long a fault with no expected alarm acts, by default
    ok_timeout: float = 120.0
    # After a runbook, alarms must stay OK this long (virtual seconds): a poison message is
    # received 5 times, a visibility timeout (365 s) apart, before it reaches the DLQ.
    settle_virtual_seconds: float = 2400.0
    remedy_attempts: int = 3  # a runbook is run again while an alarm stays in ALARM, up to this  # every alarm back to OK after the remedy
    rest_timeout: float = 120.0  # traffic stopped: every file accounted for, the counter agreeing
    min_handler_seconds: float = 30.0  # the sandbox's real-time floor of a function's timeout
    disabled: tuple[str, ...] = field(default_factory=tuple)  # alarm ids deleted before the game day

    @classmethod
    def short_form(cls, **overrides: object) -> GameDaySettings:
        """The default suite's game day: a shorter healthy phase, the same waits."""
        return cls(**{"short": True, "healthy_seconds": 8.0, **overrides})  # type: ignore[arg-type]

    def parameters(self) -> dict[str, str]:
        """Stack parameters. Explicit waits are real seconds (the scaled defaults round to 0 s)."""
        return {
            "MaxConcurrentWorkflows": str(self.max_concurrency),
            "FolderSettleSeconds": "2",
            "CapacityRetrySeconds": "2",
            "ReconcileGraceSeconds": str(GRACE_REAL_SECONDS),
        }


def sandbox_timings(settings: GameDaySettings) -> list[str]:
    """Where the sandbox's times differ from AWS's, for the report (both times given)."""
    scale = settings.time_scale
    return [
        f"Time scale {scale:g}: a real second is {1 / scale:.0f} virtual seconds. Alarm periods, evaluation, schedules "
        "and queue delays run on the virtual clock; detect and repair times are given real and virtual (virtual is "
        "what AWS would take, give or take CloudWatch's own delay of about a minute in publishing metrics).",
        f"Function timeouts: the sandbox cuts a function off after its Timeout scaled, but never before "
        f"{settings.min_handler_seconds:.0f} real seconds ({settings.min_handler_seconds / scale / 60:.0f} virtual "
        "minutes); on AWS a timeout fires at the function's Timeout. A fault that hangs a function is detected later "
        "in virtual time here than on AWS.",
        f"Reconciler grace (ReconcileGraceSeconds): {GRACE_REAL_SECONDS} s real here ({GRACE_REAL_SECONDS / scale / 60:.0f} "
        f"virtual minutes), {AWS_GRACE_SECONDS} s on AWS: the grace must stay above the longest a router may run, which "
        "here is the real-time floor above. A holder with no execution is released later in virtual time than on AWS.",
        "Queue waits given explicitly (FolderSettleSeconds 2, CapacityRetrySeconds 2) are real seconds, as on AWS, "
        "so a folder settles and a capacity wait lasts longer in virtual time than with the template's defaults.",
        "Lambda throttles and reserved concurrency are not modelled by the sandbox: no Throttles metric is published.",
    ]
