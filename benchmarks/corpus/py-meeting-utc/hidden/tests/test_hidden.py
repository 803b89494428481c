from datetime import datetime, timedelta, timezone

from meetings.times import Meeting, to_utc


def test_negative_offset_crosses_midnight():
    moment = datetime(2024, 12, 31, 22, 30, tzinfo=timezone(-timedelta(hours=5)))
    assert to_utc(moment) == datetime(2025, 1, 1, 3, 30, tzinfo=timezone.utc)
    assert to_utc(moment).day == 1


def test_utc_input_is_unchanged():
    moment = datetime(2024, 3, 3, 12, 0, tzinfo=timezone.utc)
    assert to_utc(moment) == moment and to_utc(moment).utcoffset() == timedelta(0)


def test_result_is_in_utc():
    moment = datetime(2024, 1, 1, 0, 0, tzinfo=timezone(timedelta(hours=9)))
    assert to_utc(moment).utcoffset() == timedelta(0)
    assert (to_utc(moment).day, to_utc(moment).hour) == (31, 15)


def test_scheduled_meeting_shows_right_for_others():
    standup = Meeting.schedule("standup", "2024-05-01T09:00", "UTC+2", 15)
    assert standup.start_utc.hour == 7
    assert standup.local_start("UTC-04:00") == "2024-05-01 03:00"
    assert standup.local_start("UTC+05:30") == "2024-05-01 12:30"


def test_meetings_in_different_offsets_overlap():
    a = Meeting.schedule("a", "2024-05-01T09:00", "UTC+2", 60)
    b = Meeting.schedule("b", "2024-05-01T07:30", "UTC", 30)
    c = Meeting.schedule("c", "2024-05-01T09:00", "UTC", 30)
    assert a.overlaps(b)
    assert not a.overlaps(c)
