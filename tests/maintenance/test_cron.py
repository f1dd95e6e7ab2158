"""Cron parsing and DST-correct fire times (tenure.cron): pure computation, no database."""

from __future__ import annotations

import time

import pytest

from tenure.cron import ALIASES, FIELDS, parse
from tenure.errors import InvalidSchedule

from .conftest import PARIS, at, wall


def fires_between(expr: str, start: int, end: int, tz: str = "Europe/Paris") -> list[int]:
    cron, out, t = parse(expr, tz), [], start
    while True:
        t = cron.next_after(t)
        if t is None or t > end:
            return out
        out.append(t)


# -- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "field"), [
    ("61 * * * *", "minute"),
    ("* 24 * * *", "hour"),
    ("* * 0 * *", "day-of-month"),
    ("* * * 13 *", "month"),
    ("* * * * 8", "day-of-week"),
    ("*/0 * * * *", "minute"),
    ("a * * * *", "minute"),
])
def test_a_bad_field_is_named(expr, field):
    with pytest.raises(InvalidSchedule) as info:
        parse(expr)
    assert info.value.code == "TN4001"
    assert info.value.details["field"] == field
    assert field in str(info.value)


@pytest.mark.parametrize("expr", ["* * * *", "* * * * * *", "0 0 1 1 * 2030", "", "   ", "@reboot", "@every 5m"])
def test_not_five_fields_or_a_known_alias_is_refused(expr):
    with pytest.raises(InvalidSchedule) as info:
        parse(expr)
    assert info.value.details["field"] == "cron"


def test_a_non_string_expression_is_refused():
    with pytest.raises(InvalidSchedule):
        parse(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("tz", ["Mars/Olympus", "", "Europe/Nowhere", "../etc/passwd", None])
def test_an_unknown_zone_is_named(tz):
    with pytest.raises(InvalidSchedule) as info:
        parse("* * * * *", tz)
    assert info.value.details["field"] == "tz"


def test_an_expression_that_never_fires_is_refused():
    with pytest.raises(InvalidSchedule) as info:
        parse("0 0 31 2 *")
    assert info.value.details["field"] == "day-of-month"


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_aliases_expand_to_five_fields(alias):
    cron = parse(alias)
    assert len(cron.fields) == len(FIELDS) == 5
    assert cron.spec == ALIASES[alias]


def test_aliases_fire_where_expected():
    t0 = at(2026, 1, 7, 10, 17, tz=PARIS)  # a Wednesday
    assert wall(parse("@hourly", "Europe/Paris").next_after(t0)) == "2026-01-07T11:00+01:00"
    assert wall(parse("@daily", "Europe/Paris").next_after(t0)) == "2026-01-08T00:00+01:00"
    assert wall(parse("@weekly", "Europe/Paris").next_after(t0)) == "2026-01-11T00:00+01:00"
    assert wall(parse("@monthly", "Europe/Paris").next_after(t0)) == "2026-02-01T00:00+01:00"
    assert wall(parse("@yearly", "Europe/Paris").next_after(t0)) == "2027-01-01T00:00+01:00"


def test_whitespace_is_normalised_and_names_are_accepted():
    assert parse("  0   9 * *  mon-fri ").expression == "0 9 * * mon-fri"
    assert parse("0 0 1 jan *").next_after(at(2026, 6, 1)) == at(2027, 1, 1, tz=__import__("datetime").UTC)


def test_next_after_is_strictly_after():
    cron = parse("*/5 * * * *", "UTC")
    t = 1_700_000_100_000  # a five-minute boundary
    assert cron.next_after(t) == t + 300_000
    assert cron.next_after(t - 1) == t


# -- daylight saving time (Europe/Paris: spring forward 2026-03-29, fall back 2026-10-25) -------------


def test_spring_forward_a_skipped_daily_time_fires_once_at_the_transition():
    fires = fires_between("30 2 * * *", at(2026, 3, 28, 12), at(2026, 3, 30, 12))
    assert [wall(f) for f in fires] == ["2026-03-29T03:00+02:00", "2026-03-30T02:30+02:00"]


def test_spring_forward_times_outside_the_gap_are_untouched():
    assert [wall(f) for f in fires_between("30 1 * * *", at(2026, 3, 28, 12), at(2026, 3, 29, 12))] == \
        ["2026-03-29T01:30+01:00"]
    assert [wall(f) for f in fires_between("30 3 * * *", at(2026, 3, 28, 12), at(2026, 3, 29, 12))] == \
        ["2026-03-29T03:30+02:00"]


def test_spring_forward_every_time_in_the_gap_collapses_into_one_fire():
    fires = fires_between("*/15 2-3 * * *", at(2026, 3, 29, 0), at(2026, 3, 29, 5))
    assert [wall(f) for f in fires] == ["2026-03-29T03:00+02:00", "2026-03-29T03:15+02:00",
                                        "2026-03-29T03:30+02:00", "2026-03-29T03:45+02:00"]


def test_fall_back_a_repeated_daily_time_fires_once_at_its_first_occurrence():
    fires = fires_between("30 2 * * *", at(2026, 10, 24, 12), at(2026, 10, 26, 12))
    assert [wall(f) for f in fires] == ["2026-10-25T02:30+02:00", "2026-10-26T02:30+01:00"]


def test_fall_back_a_time_before_the_repeat_fires_once():
    fires = fires_between("30 1 * * *", at(2026, 10, 24, 12), at(2026, 10, 25, 12))
    assert [wall(f) for f in fires] == ["2026-10-25T01:30+02:00"]


def test_hourly_schedules_follow_elapsed_time_across_dst():
    spring = fires_between("0 * * * *", at(2026, 3, 29, 0) - 1, at(2026, 3, 30, 0) - 1)
    autumn = fires_between("0 * * * *", at(2026, 10, 25, 0) - 1, at(2026, 10, 26, 0) - 1)
    assert len(spring) == 23 and len(autumn) == 25
    assert all(b - a == 3_600_000 for a, b in zip(spring, spring[1:], strict=False))
    assert all(b - a == 3_600_000 for a, b in zip(autumn, autumn[1:], strict=False))
    assert "2026-10-25T02:00+01:00" in [wall(f) for f in autumn]  # the repeated hour fires again


def test_sub_hourly_schedules_keep_their_rhythm_through_the_repeated_hour():
    fires = fires_between("*/10 * * * *", at(2026, 10, 25, 1, 55), at(2026, 10, 25, 3, 5))
    gaps = {b - a for a, b in zip(fires, fires[1:], strict=False)}
    assert gaps == {600_000} and len(fires) == 13  # 02:00..02:50 twice, then 03:00


def test_an_hour_restricted_schedule_does_not_repeat_in_the_second_pass():
    fires = fires_between("*/30 2 * * *", at(2026, 10, 25, 0), at(2026, 10, 25, 4))
    assert [wall(f) for f in fires] == ["2026-10-25T02:00+02:00", "2026-10-25T02:30+02:00"]


def test_new_york_and_a_southern_zone():
    ny = __import__("zoneinfo").ZoneInfo("America/New_York")
    fires = fires_between("30 2 * * *", at(2026, 3, 7, 12, tz=ny), at(2026, 3, 9, 12, tz=ny), "America/New_York")
    assert [wall(f, ny) for f in fires] == ["2026-03-08T03:00-04:00", "2026-03-09T02:30-04:00"]
    syd = __import__("zoneinfo").ZoneInfo("Australia/Sydney")  # falls back on 2026-04-05
    fires = fires_between("30 2 * * *", at(2026, 4, 4, 12, tz=syd), at(2026, 4, 5, 12, tz=syd), "Australia/Sydney")
    assert [wall(f, syd) for f in fires] == ["2026-04-05T02:30+11:00"]


def test_starting_inside_the_repeated_hour_finds_the_next_fire():
    cron = parse("0 * * * *", "Europe/Paris")
    first_pass = at(2026, 10, 25, 2, 30, fold=0)   # 02:30 CEST
    second_pass = at(2026, 10, 25, 2, 30, fold=1)  # 02:30 CET, an hour later
    assert wall(cron.next_after(first_pass)) == "2026-10-25T02:00+01:00"
    assert wall(cron.next_after(second_pass)) == "2026-10-25T03:00+01:00"


# -- windows used by the catch-up policies -------------------------------------------------------------


def test_latest_and_fires_windows():
    cron = parse("0 * * * *", "UTC")
    h = 3_600_000
    t0 = 1_700_000_000_000 - 1_700_000_000_000 % h
    assert cron.latest(t0, t0 + 5 * h + 10) == t0 + 5 * h
    assert cron.latest(t0 + 1, t0 + h - 1) is None
    assert cron.fires(t0, t0 + 3 * h, 100) == [t0, t0 + h, t0 + 2 * h, t0 + 3 * h]
    assert cron.fires(t0, t0 + 3 * h, 2) == [t0, t0 + h]
    yearly = parse("@yearly", "UTC")
    jan1 = 1_767_225_600_000  # 2026-01-01T00:00Z
    assert yearly.latest(jan1, jan1 + 300 * 86_400_000) == jan1


def test_minute_schedules_stay_cheap_next_to_a_transition():
    cron = parse("* * * * *", "Europe/Paris")
    t = at(2026, 10, 25, 2, 0, fold=0)
    started = time.perf_counter()
    for i in range(20):
        cron.next_after(t + i * 60_000)
    assert (time.perf_counter() - started) / 20 < 0.2
