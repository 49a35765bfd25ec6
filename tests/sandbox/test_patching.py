"""Counted patches: on at the first install, off at the last uninstall, stacked sets come off in order."""

from __future__ import annotations

import types

import pytest

from sandbox.seams.patching import CountedPatches, Patch, RoutedSeam


class Owner:
    def greet(self) -> str:
        return "moto"

    @staticmethod
    def tag() -> str:
        return "static"


def loud(original: object) -> object:
    def greet(self: Owner) -> str:
        return original(self).upper()  # type: ignore[operator]

    return greet


def test_patches_go_on_at_the_first_install_and_off_at_the_last_uninstall() -> None:
    before = vars(Owner)["greet"]
    patches = CountedPatches(lambda: [Patch(Owner, "greet", loud)], marker="__test_mark__")
    patches.install()
    patches.install()
    assert Owner().greet() == "MOTO" and getattr(Owner.greet, "__test_mark__", False)
    patches.uninstall()
    assert patches.installed() and Owner().greet() == "MOTO"
    patches.uninstall()
    assert not patches.installed() and vars(Owner)["greet"] is before
    patches.uninstall()  # one too many: nothing happens
    assert vars(Owner)["greet"] is before and patches.count == 0


def test_a_staticmethod_stays_one_and_a_module_global_is_replaced() -> None:
    module = types.ModuleType("fake_moto_module")
    module.helper = len  # type: ignore[attr-defined]
    patches = CountedPatches(
        lambda: [
            Patch(Owner, "tag", lambda original: staticmethod(lambda: original.__func__() + "!")),
            Patch(module, "helper", lambda _original: abs),
        ],
        marker="__test_mark__",
    )
    patches.install()
    try:
        assert Owner.tag() == "static!" and Owner().tag() == "static!"
        assert getattr(Owner.tag, "__test_mark__", False)
        assert module.helper is abs  # a builtin takes no mark, and is replaced all the same
    finally:
        patches.uninstall()
    assert Owner.tag() == "static" and module.helper is len


def test_hooks_run_inside_install_and_uninstall_in_order() -> None:
    calls: list[str] = []
    inner = CountedPatches(lambda: [Patch(Owner, "greet", loud)], marker="__test_mark__")

    def after_install() -> None:
        calls.append("after_install")
        inner.install()

    def before_uninstall() -> None:
        calls.append("before_uninstall")
        inner.uninstall()

    outer = CountedPatches(
        lambda: [],
        marker="__test_mark__",
        after_install=after_install,
        before_uninstall=before_uninstall,
        after_uninstall=lambda: calls.append("after_uninstall"),
    )
    outer.install()
    assert inner.installed()
    outer.uninstall()
    assert not inner.installed() and calls == ["after_install", "before_uninstall", "after_uninstall"]


def test_an_attribute_the_owner_lacks_is_added_and_removed_again() -> None:
    patches = CountedPatches(lambda: [Patch(Owner, "wave", lambda absent: lambda self: f"added over {absent}")], marker="__test_mark__")
    patches.install()
    try:
        assert Owner().wave() == "added over None"  # type: ignore[attr-defined]
    finally:
        patches.uninstall()
    assert "wave" not in vars(Owner)


def test_a_replacement_wrapped_since_stays_under_the_wrapper_and_is_reused() -> None:
    original = vars(Owner)["greet"]
    made: list[object] = []

    def counting_loud(before: object) -> object:
        made.append(before)
        return loud(before)

    patches = CountedPatches(lambda: [Patch(Owner, "greet", counting_loud)], marker="__test_mark__")
    patches.install()
    ours = vars(Owner)["greet"]

    def theirs(self: Owner) -> str:  # someone else's wrapper, put on after ours
        return ours(self) + "!"

    Owner.greet = theirs  # type: ignore[method-assign]
    try:
        patches.uninstall()
        assert vars(Owner)["greet"] is theirs  # left in place: theirs still calls ours
        patches.install()
        assert vars(Owner)["greet"] is theirs and made == [original]  # ours reused, not wrapped again
        assert Owner().greet() == "MOTO!"
        patches.uninstall()
    finally:
        Owner.greet = original  # type: ignore[method-assign]


def test_a_routed_seam_is_on_while_a_part_is_attached() -> None:
    seam: RoutedSeam[str] = RoutedSeam(lambda: [Patch(Owner, "greet", loud)], single="greeter")
    original = vars(Owner)["greet"]
    seam.attach("first")
    try:
        assert seam.current() == "first" and Owner().greet() == "MOTO"
        with pytest.raises(RuntimeError, match="another greeter"):
            seam.attach("second")
        seam.attach("first")  # the same part again: nothing changes
    finally:
        seam.detach("first")
    assert seam.current() is None and vars(Owner)["greet"] is original
    seam.detach("first")  # a second detach is harmless
