"""Concurrency controls shared by the masters and the API: serial execution and per-workflow caps
(``serial`` rules, ``serial_sql`` their database steps) and task groups (``task_groups`` admission order,
``task_groups_sql`` the atomic admission and release)."""
