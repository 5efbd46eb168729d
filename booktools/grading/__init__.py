"""The autograder (``python -m booktools.assignments grade``): checks run in the grader's process
and reach a submission's code in its boxed kernel by RPC. The modules, one job each:

- ``grader``: scores one submission against its release, checks running in the grader's process.
- ``channel``: the grader's channel to a kernel: cells run with a timeout, checks' calls as requests.
- ``codec``: the grader's wire format, both halves (its source is what the kernel runs).
- ``sandbox``: the box a submission's kernel runs in (bubblewrap's command line, the limits).
- ``batch``: ``grade``: a batch of submissions against one release, side by side.
- ``report``: the CSV grade report (written spreadsheet-safe, read back exactly).
- ``gradebook``: ``grade``'s scores into nbgrader's gradebook; per-student feedback files.
"""
