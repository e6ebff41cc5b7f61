#!/usr/bin/env python3
"""scripts/device/sanitize_runner.py without a GPU: a stand-in gtest binary and a stand-in
compute-sanitizer that print what the real ones print, so that the runner's bookkeeping is checked:
a timeout is never a pass, a test that breaks racecheck is named and retried with PDL off, the tests
after a break run again, a tool that does not start is not restarted the same way, race records
inside cuBLAS's kernels and API errors inside NCCL are counted apart (those in our code are not), and
a clean run exits 0."""

import os
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "scripts", "device", "sanitize_runner.py")

FAKE_GTEST = textwrap.dedent("""\
    #!/usr/bin/env python3
    import fnmatch, os, sys, time
    tests = os.environ["FAKE_TESTS"].split(",")
    flt = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--gtest_filter=")), "*")
    pos, _, neg = flt.partition("-")
    pick = [t for t in tests if any(fnmatch.fnmatchcase(t, p) for p in pos.split(":"))
            and not any(fnmatch.fnmatchcase(t, p) for p in neg.split(":") if p)]
    if "--gtest_list_tests" in sys.argv:
        print("Running main() from gtest_main.cc")
        suite = None
        for t in pick:
            s, n = t.split(".", 1)
            if s != suite:
                print(s + ".")
                suite = s
            print("  " + n + ("  # GetParam() = 1" if "/" in n else ""))
        sys.exit(0)
    tool = os.environ.get("FAKE_TOOL", "none")
    broken = failed = False
    for t in pick:
        print(f"[ RUN      ] {t}", flush=True)
        if broken:
            print(f"[  FAILED  ] {t} (1 ms)", flush=True)
            failed = True
            continue
        if t == "Graph.BreaksRacecheck" and tool == "racecheck" and os.environ.get("LAZYSCOPE_CUDA_NO_PDL") != "1":
            print("========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception", flush=True)
            print(f"[  FAILED  ] {t} (1 ms)", flush=True)
            broken = failed = True
            continue
        if t == "Slow.Hangs" and tool == os.environ.get("FAKE_HANG_TOOL"):
            time.sleep(60)
        if t == "Gemm.Prefill" and tool == "racecheck":
            print("========= Error: Race reported between Read access at nvjet_sm90_tss_8x64_badd_TNN+0xb00", flush=True)
            print("=========     and Write access at nvjet_sm90_tss_8x64_badd_TNN+0x2770 [288 hazards]", flush=True)
        if t.startswith("Comm.") and tool == "memcheck":
            # An API call that fails inside a library (NCCL probing its kernels), or inside ours.
            caller = "libnccl.so.2" if t == "Comm.Init" else "fake_gtest"
            print('========= Program hit cudaErrorNoKernelImageForDevice (error 209) due to "no kernel image '
                  'is available for execution on the device" on CUDA API call to cudaFuncGetAttributes.')
            print("=========     Saved host backtrace up to driver entry point at error")
            print("=========         Host Frame:  [0x4cb045] in libcuda.so.1")
            print(f"=========         Host Frame:  [0x1babc0] in {caller}")
            print("=========         Host Frame: main [0x4f78f] in fake_gtest")
            print("========= ", flush=True)
        print(f"[       OK ] {t} (2 ms)", flush=True)
    sys.exit(1 if failed else 0)
    """)

FAKE_SANITIZER = textwrap.dedent("""\
    #!/usr/bin/env python3
    import os, subprocess, sys
    args = sys.argv[1:]
    tool, i = "memcheck", 0
    while i < len(args) and args[i].startswith("--"):
        if args[i] == "--tool":
            tool = args[i + 1]
        if args[i] == "--kernel-name-exclude" and os.environ.get("FAKE_REJECT_EXCLUDE") == "1":
            print("========= Error: unrecognized option '--kernel-name-exclude'")
            sys.exit(1)
        i += 2
    out = subprocess.run(args[i:], env=dict(os.environ, FAKE_TOOL=tool), capture_output=True, text=True)
    sys.stdout.write(out.stdout)
    races = out.stdout.count("Race reported")
    if tool == "racecheck":
        print(f"========= RACECHECK SUMMARY: {races} hazards displayed ({races} errors, 0 warnings)")
    else:
        print(f"========= ERROR SUMMARY: {out.stdout.count('Program hit')} errors")
    sys.exit(out.returncode)
    """)


def run(work, tests, tools, budget, hang_tool="", reject_exclude=False):
    out = os.path.join(work, f"out-{tools}-{budget}-{reject_exclude}")
    env = dict(os.environ, FAKE_TESTS=",".join(tests), FAKE_HANG_TOOL=hang_tool,
               FAKE_REJECT_EXCLUDE="1" if reject_exclude else "0",
               PATH=work + os.pathsep + os.environ.get("PATH", ""))
    cmd = [sys.executable, RUNNER, "--out", out, "--tools", tools, "--budget", str(budget), "--jobs", "3",
           "--chunk", "2", "--exclude-library-kernels", "--binary", os.path.join(work, "fake_gtest") + "=*"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def row(text, label):
    for line in text.splitlines():
        if line.startswith(label + " ") and line[len(label):len(label) + 2].strip() == "":
            fields = line[44:].split()
            return dict(zip(["tests", "passed", "failed", "skipped", "broke", "not_run", "errors"], fields))
    return None


def main():
    failures = []

    def check(name, ok, text):
        if not ok:
            failures.append(name)
            print(f"FAIL {name}\n{text}")

    with tempfile.TemporaryDirectory() as work:
        for name, body in (("fake_gtest", FAKE_GTEST), ("compute-sanitizer", FAKE_SANITIZER)):
            path = os.path.join(work, name)
            with open(path, "w") as f:
                f.write(body)
            os.chmod(path, 0o755)

        clean = ["Plain.A", "Plain.B", "Gemm.Prefill", "P/Param.X/D64"]
        rc, text = run(work, clean, "memcheck,racecheck", 60)
        check("a clean run exits 0", rc == 0, text)
        check("every test passes under memcheck", row(text, "memcheck") and row(text, "memcheck")["passed"] == "4", text)
        race = row(text, "racecheck")
        check("cuBLAS race records are not our errors", race and race["errors"] == "0" and race["passed"] == "4", text)
        check("cuBLAS race records are reported apart", "1 race records inside nvjet_sm90_tss_8x64_badd_TNN" in text,
              text)

        rc, text = run(work, ["Plain.A", "Comm.Init"], "memcheck", 60)
        mem = row(text, "memcheck")
        check("an API error inside NCCL is not ours", rc == 0 and mem and mem["errors"] == "0", text)
        check("an API error inside NCCL is reported apart",
              "1 API errors: cudaFuncGetAttributes returning cudaErrorNoKernelImageForDevice inside libnccl.so.2"
              in text, text)
        rc, text = run(work, ["Plain.A", "Comm.Ours"], "memcheck", 60)
        mem = row(text, "memcheck")
        check("an API error in our own code counts", rc != 0 and mem and mem["errors"] == "1"
              and "Comm.Ours (fake_gtest): OK, 1 sanitizer reports" in text, text)

        broken = ["Plain.A", "Graph.BreaksRacecheck", "Graph.After", "Plain.B"]
        rc, text = run(work, broken, "racecheck", 60)
        race = row(text, "racecheck")
        check("the test that broke racecheck is named", "Graph.BreaksRacecheck (fake_gtest): broke the tool" in text,
              text)
        check("tests after the break run again and pass", race and race["passed"] == "3" and race["broke"] == "1",
              text)
        check("the broken test is retried with PDL off and passes there",
              "Graph.BreaksRacecheck: no hazard with PDL off (test OK)" in text, text)
        check("a break resolved by a retry leaves the run clean", rc == 0, text)

        rc, text = run(work, ["Plain.A", "Plain.B", "Plain.C"], "racecheck", 30, reject_exclude=True)
        race = row(text, "racecheck")
        check("a tool that does not start is not run again the same way", race and race["broke"] == "3", text)
        check("racecheck that refuses the exclusion is retried without it",
              "Plain.C: no hazard with cuBLAS kernels checked too (test OK)" in text and rc == 0, text)

        rc, text = run(work, ["Plain.A", "Slow.Hangs", "Plain.B"], "memcheck", 12, hang_tool="memcheck")
        mem = row(text, "memcheck")
        check("a timeout fails the run", rc != 0, text)
        check("a test cut off by the budget is not a pass", mem and mem["passed"] != "3" and "TIMEOUT" in text, text)
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
