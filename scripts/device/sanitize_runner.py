#!/usr/bin/env python3
"""Runs GPU test binaries under compute-sanitizer tools, many small test processes at once.

Called by scripts/device/sanitize_all.sh (which builds the binaries); see there for the options.
Each process runs a few consecutive tests of one binary under one tool, so a sanitizer that breaks
its process loses only that process: the tests it did not reach run again, one process each, and
the test it broke in is recorded by name. Under racecheck a test that breaks the tool runs again
alone with programmatic dependent launch off (LAZYSCOPE_CUDA_NO_PDL=1), then also with CUDA graphs
off (LAZYSCOPE_CUDA_NO_GRAPHS=1), each reported as such (the first retry only drops the exclusion
of cuBLAS's kernels, where they were left out). Race reports inside library kernels (cuBLAS's nvjet,
where they are not left out) are counted apart from ours. A process that runs out of time is a
TIMEOUT and the tests it did not finish are counted as not run, never as passed.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

TOOLS = ("memcheck", "synccheck", "initcheck", "racecheck")
FINISHED = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] (\S+) \(\d+ ms\)$")
STARTED = re.compile(r"^\[ RUN +\] (\S+)$")
SUMMARY = re.compile(r"^========= (ERROR|RACECHECK|INITCHECK|SYNCCHECK|LEAK) SUMMARY: (\d+) (errors?|hazards?)")
RACE_COUNTS = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
REPORT = re.compile(
    r"^========= (Invalid|Uninitialized|Host API memory access error|Program hit|Leaked|Error:|Warning:|"
    r"Barrier error|Misaligned|Out-of-range|Malloc|Hardware|Cuda API error)")
INTERNAL = re.compile(r"Internal Sanitizer Error|failed to handle a hardware exception", re.IGNORECASE)
NO_GPU_WORK = "Target application terminated before first instrumented API call"
RACE = re.compile(r"^========= (?:Error|Warning): Race reported between \w+ access at (\S+?)\+0x")
API_ERROR = re.compile(r"^========= Program hit (\w+) .* on CUDA API call to (\w+)")
HOST_FRAME = re.compile(r"^=========\s+Host Frame:.* in (\S+)$")
VARIANTS = (  # racecheck retries of a test that broke the tool, in turn; all instrument cuBLAS too
    ("cuBLAS kernels checked too", {}),
    ("PDL off", {"LAZYSCOPE_CUDA_NO_PDL": "1"}),
    ("PDL and graphs off", {"LAZYSCOPE_CUDA_NO_PDL": "1", "LAZYSCOPE_CUDA_NO_GRAPHS": "1"}),
)


@dataclass
class Job:
    order: int
    tool: str            # a sanitizer tool, "none" (unsanitized) or "command"
    label: str           # the line of the summary this job counts towards
    argv: list
    binary: str = ""
    tests: list = field(default_factory=list)  # empty: not a test job
    env: dict = field(default_factory=dict)
    variant: int = -1    # index into VARIANTS for racecheck retries
    # results
    rc: int = None
    seconds: float = 0.0
    log: str = ""
    status: str = "not run"


@dataclass
class TestResult:
    verdict: str = "not run"   # OK, FAILED, SKIPPED, broke the tool, crashed, tool did not start, timeout, not run
    reports: int = 0           # sanitizer reports printed while it ran
    note: str = ""


class Runner:
    def __init__(self, args):
        self.args = args
        self.deadline = time.monotonic() + args.budget
        self.lock = threading.Lock()
        self.queue = []
        self.done = []
        self.counter = 0
        self.logs = 0
        self.results = {}   # (label, binary, test) -> TestResult
        self.summaries = {}  # label -> sanitizer summary totals
        self.started = time.monotonic()
        os.makedirs(os.path.join(args.out, "jobs"), exist_ok=True)

    def add(self, job):
        with self.lock:
            self.queue.append(job)
            self.queue.sort(key=lambda j: j.order)

    def next_order(self, base):
        self.counter += 1
        return base * 100000 + self.counter

    def worker(self):
        while True:
            with self.lock:
                if not self.queue:
                    if self.running == 0:
                        return
                    job = None
                else:
                    job = self.queue.pop(0)
                    self.running += 1
            if job is None:
                time.sleep(0.2)
                continue
            try:
                self.run(job)
                self.after(job)
            finally:
                with self.lock:
                    self.running -= 1
                    self.done.append(job)

    def run(self, job):
        left = self.deadline - time.monotonic()
        if left < 8:
            job.status = "not run (budget spent)"
            return
        limit = min(left, self.args.job_timeout) if self.args.job_timeout > 0 else left
        env = dict(os.environ)
        env.update(job.env)
        start = time.monotonic()
        proc = subprocess.Popen(job.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, text=True, errors="replace")
        try:
            out, _ = proc.communicate(timeout=limit)
            job.rc = proc.returncode
            job.status = "ran"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
            job.rc = 124
            job.status = f"TIMEOUT after {limit:.0f} s"
        job.seconds = time.monotonic() - start
        job.log = out
        with self.lock:
            self.logs += 1
            name = f"{self.logs:04d}_{job.tool}.log"
        with open(os.path.join(self.args.out, "jobs", name), "w") as f:
            f.write(f"# {job.label}: {' '.join(job.argv)}\n# env {job.env}\n# rc {job.rc}, {job.status}, "
                    f"{job.seconds:.1f} s\n")
            f.write(out)

    def after(self, job):
        if not job.tests or job.status.startswith("not run"):
            return
        current = None
        broken = None          # the test during which the tool broke
        after_break = set()    # tests started after that: rerun, their verdicts do not count
        seen = set()
        verdicts = {}
        reports = {}
        summary_lines = []
        library = {}  # race records inside library kernels, by kernel
        library_api = {}  # API errors returned inside a library (its own probing), by library and call
        lines = job.log.splitlines()
        for index, line in enumerate(lines):
            m = STARTED.match(line)
            if m:
                current = m.group(1)
                seen.add(current)
                if broken is not None:
                    after_break.add(current)
                continue
            m = FINISHED.match(line)
            if m:
                verdicts[m.group(2)] = m.group(1)
                current = None
                continue
            if broken is None and INTERNAL.search(line):
                broken = current or "(outside any test)"
                continue
            race = RACE.match(line)
            if race and self.is_library(race.group(1)):
                library[race.group(1)] = library.get(race.group(1), 0) + 1
                continue
            api = API_ERROR.match(line)
            if api:
                caller = self.api_caller(lines, index)
                if caller and self.is_library_api(caller):
                    key = f"{api.group(2)} returning {api.group(1)} inside {caller}"
                    library_api[key] = library_api.get(key, 0) + 1
                    continue
            if REPORT.match(line):
                reports[current or "(process)"] = reports.get(current or "(process)", 0) + 1
            if SUMMARY.match(line) and "were not printed" not in line:
                summary_lines.append(line)
        # One summary per process: racecheck's own if it printed one, else the error summary.
        race = [RACE_COUNTS.search(l) for l in summary_lines if RACE_COUNTS.search(l)]
        with self.lock:
            s = self.summaries.setdefault(job.label, {"errors": 0, "warnings": 0, "processes": 0, "library": {},
                                                      "library_api": {}})
            for kernel, count in library.items():
                s["library"][kernel] = s["library"].get(kernel, 0) + count
            for call, count in library_api.items():
                s["library_api"][call] = s["library_api"].get(call, 0) + count
            if race:
                # Library records are errors or warnings too: take them out of ours.
                theirs = sum(library.values())
                errors, warnings = int(race[-1].group(1)), int(race[-1].group(2))
                s["errors"] += max(0, errors - theirs)
                s["warnings"] += max(0, warnings - max(0, theirs - errors))
                s["processes"] += 1
            elif summary_lines:
                s["errors"] += max(0, int(SUMMARY.match(summary_lines[-1]).group(2)) - sum(library_api.values()))
                s["processes"] += 1
            elif NO_GPU_WORK in job.log:
                s["processes"] += 1  # nothing on the GPU to check: the tool says so instead
        timed_out = job.rc == 124
        if timed_out and current is not None:
            broken = None
        # The process ended inside a test (crash, not a timeout): that test broke it.
        crashed = broken is None and not timed_out and current is not None
        if crashed:
            broken = current
        # No test started and the process failed: the tool itself did not start (a bad option, a
        # broken install). Running the tests again the same way would only fail again.
        no_start = not seen and not timed_out and job.rc not in (0, None)
        rerun = []
        with self.lock:
            for test in job.tests:
                key = (job.label, job.binary, test)
                r = self.results.setdefault(key, TestResult())
                if no_start:
                    r.verdict = "tool did not start"
                elif test == broken:
                    r.verdict = "crashed" if crashed else "broke the tool"
                    r.reports += reports.get(test, 0)
                elif test in after_break or (test not in seen and not timed_out):
                    rerun.append(test)
                elif test in verdicts:
                    r.verdict = verdicts[test]
                    r.reports += reports.get(test, 0)
                elif timed_out:
                    r.verdict = "timeout" if test == current else "not run (timeout)"
            if "(process)" in reports:
                r = self.results.setdefault((job.label, job.binary, "(process)"), TestResult())
                r.reports += reports["(process)"]
        # One process each: if the tool breaks again it loses one test, and they run side by side.
        for test in rerun:
            self.add(self.test_job(job.tool, job.label, job.binary, [test], job.env, job.variant, base=3))
        retry = job.tests if no_start else [broken] if broken not in (None, "(outside any test)") else []
        if retry and job.tool == "racecheck":
            variant = job.variant + 1
            if variant == 0 and not self.args.exclude_library_kernels:
                variant = 1  # the main run checked cuBLAS's kernels already
            if variant < len(VARIANTS):
                name, extra = VARIANTS[variant]
                env = dict(job.env)
                env.update(extra)
                self.add(self.test_job("racecheck", f"racecheck ({name})", job.binary, retry, env, variant, base=4))

    @staticmethod
    def api_caller(lines, index):
        """The library that made the failing API call of the report at lines[index]: the first host
        frame of its backtrace outside the driver (None when the report has no backtrace)."""
        for line in lines[index + 1:index + 40]:
            if line.strip() == "=========":
                break
            frame = HOST_FRAME.match(line)
            if frame and not frame.group(1).startswith("libcuda.so"):
                return frame.group(1)
        return None

    def is_library_api(self, caller):
        return any(name and caller.startswith(name) for name in self.args.library_apis.split(","))

    def is_library(self, kernel):
        return any(name and kernel.startswith(name) for name in self.args.library_kernels.split(","))

    def sanitizer_flags(self, tool, variant=-1):
        flags = []
        if tool == "memcheck":
            flags = ["--leak-check", "full"]
        elif tool == "racecheck":
            flags = ["--racecheck-report", "analysis"]
            if self.args.exclude_library_kernels and variant < 0:
                for name in self.args.library_kernels.split(","):
                    flags += ["--kernel-name-exclude", f"kns={name}"]
        return flags

    def test_job(self, tool, label, binary, tests, env, variant=-1, base=2):
        argv = [binary, "--gtest_filter=" + ":".join(t.replace("-", "?") for t in tests)]
        if tool != "none":
            argv = ["compute-sanitizer", "--tool", tool, *self.sanitizer_flags(tool, variant), "--error-exitcode", "9",
                    "--print-limit", str(self.args.print_limit), *argv]
        return Job(self.next_order(base), tool, label, argv, binary, list(tests), dict(env), variant)

    def run_all(self):
        self.running = 0
        threads = [threading.Thread(target=self.worker) for _ in range(self.args.jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def list_tests(binary, gtest_filter):
    out = subprocess.run([binary, f"--gtest_filter={gtest_filter}", "--gtest_list_tests"], capture_output=True,
                         text=True, check=True).stdout
    tests, suite = [], None
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split()[0]
        else:
            tests.append(suite + line.split()[0])
    return tests


def chunks(tests, size, heavy):
    light, heavy_tests = [], []
    for t in tests:
        (heavy_tests if heavy and re.search(heavy, t) else light).append(t)
    out = [[t] for t in heavy_tests]
    for i in range(0, len(light), size):
        out.append(light[i:i + size])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--binary", action="append", default=[], help="PATH=FILTER: a test binary and its GPU tests")
    p.add_argument("--unsanitized", action="append", default=[], help="PATH=FILTER run once without a sanitizer")
    p.add_argument("--command", action="append", default=[], help="LABEL=SHELL COMMAND (probes), run first")
    p.add_argument("--budget", type=float, default=420, help="seconds from the start for every process")
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--chunk", type=int, default=8, help="tests per process")
    p.add_argument("--heavy", default="", help="regex: tests that get a process of their own, started first")
    p.add_argument("--job-timeout", type=float, default=0, help="cap per process (0: what is left of the budget)")
    p.add_argument("--print-limit", type=int, default=20)
    p.add_argument("--library-kernels", default="nvjet", help="kernel name parts racecheck leaves out")
    p.add_argument("--exclude-library-kernels", action="store_true")
    p.add_argument("--library-apis", default="libnccl",
                   help="libraries whose own failing API calls (probes they handle) are counted apart")
    p.add_argument("--initcheck-control", default="",
                   help="a gtest filter run under initcheck once more without LAZYSCOPE_CUDA_ZERO_GEMM_OUTPUTS")
    args = p.parse_args()
    tools = [t for t in args.tools.split(",") if t]
    for t in tools:
        if t not in TOOLS:
            sys.exit(f"unknown tool '{t}' (expected one of {', '.join(TOOLS)})")
    runner = Runner(args)
    for spec in args.command:
        label, command = spec.split("=", 1)
        runner.add(Job(runner.next_order(0), "command", label, ["bash", "-c", command]))
    listed = {}
    for spec in args.unsanitized:
        binary, gtest_filter = spec.split("=", 1)
        tests = list_tests(binary, gtest_filter)
        listed[("unsanitized", binary)] = tests
        runner.add(runner.test_job("none", "unsanitized", binary, tests, {}, base=0))
    tool_env = {"initcheck": {"LAZYSCOPE_CUDA_ZERO_GEMM_OUTPUTS": "1"}}
    # Slow tools first in every round, so that a budget that runs out cuts every tool's tail.
    order = sorted(tools, key=lambda t: ("racecheck", "initcheck", "memcheck", "synccheck").index(t))
    work = []  # (heavy first, position, binary, chunk) over every binary
    for spec in args.binary:
        binary, gtest_filter = spec.split("=", 1)
        tests = list_tests(binary, gtest_filter)
        for tool in order:
            listed[(tool, binary)] = tests
        for chunk in chunks(tests, args.chunk, args.heavy):
            heavy = len(chunk) == 1 and bool(args.heavy) and re.search(args.heavy, chunk[0]) is not None
            work.append((0 if heavy else 1, len(work), binary, chunk))
    for k, (_, _, binary, chunk) in enumerate(sorted(work)):
        for tool in order:
            job = runner.test_job(tool, tool, binary, chunk, tool_env.get(tool, {}), base=1)
            job.order = 100000 + k * 10 + order.index(tool)
            runner.add(job)
    if args.initcheck_control and "initcheck" in tools and args.binary:
        binary = args.binary[0].split("=", 1)[0]
        tests = list_tests(binary, args.initcheck_control)
        listed[("initcheck without zeroed GEMM outputs", binary)] = tests
        runner.add(runner.test_job("initcheck", "initcheck without zeroed GEMM outputs", binary, tests, {}, base=0))
    runner.run_all()
    return report(runner, tools, listed)


def clean_except_broken(runner, listed):
    """racecheck is clean but for tests that broke it (those are judged by their retries)."""
    keys = [k for k in runner.results if k[0] == "racecheck" and k[2] != "(process)"]
    total = sum(len(t) for (l, _), t in listed.items() if l == "racecheck")
    ok = sum(1 for k in keys
             if runner.results[k].verdict in ("OK", "broke the tool", "crashed", "tool did not start")
             and not runner.results[k].reports)
    summary = runner.summaries.get("racecheck", {"errors": 0})
    return ok == total and summary["errors"] == 0


def report(runner, tools, listed):
    lines = []
    wall = time.monotonic() - runner.started
    lines.append(f"sanitizer runs: {wall:.0f} s wall, {len(runner.done)} processes, budget {runner.args.budget:.0f} s, "
                 f"{runner.args.jobs} at a time")
    for job in sorted(runner.done, key=lambda j: j.order):
        if job.tool == "command":
            lines.append(f"\n## {job.label} (rc {job.rc}, {job.status}, {job.seconds:.1f} s)\n")
            lines.extend("    " + l for l in job.log.strip().splitlines()[-40:])
    lines.append("")
    labels = []
    for job in sorted(runner.done, key=lambda j: j.order):
        if job.tests and job.label not in labels:
            labels.append(job.label)
    header = f"{'run':44} {'tests':>5} {'passed':>6} {'failed':>6} {'skipped':>7} {'broke':>5} {'not run':>7} " \
             f"{'errors':>6} {'seconds':>7}"
    lines.append(header)
    label_clean = {}
    problems = []
    for label in labels:
        jobs = [j for j in runner.done if j.label == label and j.tests]
        keys = [k for k in runner.results if k[0] == label and k[2] != "(process)"]
        if label in tools or label == "unsanitized":
            total = sum(len(t) for (l, _), t in listed.items() if l == label)
        else:
            total = len(keys)
        counts = {"OK": 0, "FAILED": 0, "SKIPPED": 0, "broke the tool": 0}
        for k in keys:
            v = runner.results[k].verdict
            if v in counts:
                counts[v] += 1
            elif v in ("crashed", "tool did not start"):
                counts["broke the tool"] += 1
            if v != "OK" or runner.results[k].reports:
                problems.append(f"{label}: {k[2]} ({os.path.basename(k[1])}): {v}, "
                                f"{runner.results[k].reports} sanitizer reports")
        for k in runner.results:
            if k[0] == label and k[2] == "(process)" and runner.results[k].reports:
                problems.append(f"{label}: {runner.results[k].reports} reports outside any test (leaks at exit?) "
                                f"in {os.path.basename(k[1])}")
        not_run = total - sum(counts.values())
        summary = runner.summaries.get(label, {"errors": 0, "warnings": 0, "processes": 0, "library": {}})
        sanitized = label != "unsanitized"
        missing_summaries = sum(1 for j in jobs if j.status == "ran") - summary["processes"] if sanitized else 0
        seconds = sum(j.seconds for j in jobs)
        timeouts = sum(1 for j in jobs if j.status.startswith("TIMEOUT"))
        errors = f"{summary['errors']}" if sanitized else "-"
        if summary.get("warnings"):
            errors += f"+{summary['warnings']}w"
        lines.append(f"{label:44} {total:5d} {counts['OK']:6d} {counts['FAILED']:6d} {counts['SKIPPED']:7d} "
                     f"{counts['broke the tool']:5d} {not_run:7d} {errors:>6} {seconds:7.0f}")
        notes = []
        for kernel, count in sorted(summary.get("library", {}).items()):
            notes.append(f"{count} race records inside {kernel} (cuBLAS, not ours; not in the errors column)")
        for call, count in sorted(summary.get("library_api", {}).items()):
            notes.append(f"{count} API errors: {call} (the library's own call, not ours; not in the errors column)")
        if timeouts:
            notes.append(f"{timeouts} processes TIMEOUT")
        if missing_summaries > 0:
            notes.append(f"{missing_summaries} processes ended without the sanitizer's summary")
        for note in notes:
            lines.append(f"{'':44} {note}")
        if label in tools or label == "unsanitized":
            label_clean[label] = not (counts["OK"] != total or summary["errors"] or timeouts or missing_summaries > 0)
    # Tests that broke racecheck count as checked where a retry with a feature off passed them with
    # no report (with graphs off, the tests that count graph replays expect none).
    resolved = []
    for (label, binary, test), r in list(runner.results.items()):
        if label != "racecheck" or r.verdict not in ("broke the tool", "crashed", "tool did not start"):
            continue
        for name, _ in VARIANTS:
            v = runner.results.get((f"racecheck ({name})", binary, test))
            if v and v.reports == 0 and v.verdict == "OK":
                resolved.append((test, name, v.verdict))
                break
    broken = [k for k, r in runner.results.items()
              if k[0] == "racecheck" and r.verdict in ("broke the tool", "crashed", "tool did not start")]
    if broken:
        lines.append(f"\nracecheck broke in {len(broken)} tests; checked again with a feature off: {len(resolved)}")
        for test, name, verdict in resolved:
            lines.append(f"  {test}: no hazard with {name} (test {verdict})")
        if len(resolved) == len(broken) and clean_except_broken(runner, listed):
            label_clean["racecheck"] = True
    if problems:
        lines.append("\nnot clean (test: verdict, reports):")
        lines.extend("  " + p for p in problems[:200])
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(os.path.join(runner.args.out, "sanitize_summary.txt"), "w") as f:
        f.write(text)
    for tool in tools:
        label_clean.setdefault(tool, False)  # a tool with no test run is not clean
    return 0 if all(label_clean.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
