"""PNG plots of the raw benchmark results (matplotlib, Debian's
python3-matplotlib), one set per benchmark; used by bench/report.py.

Every bar is a mean over the repetitions of a run, its whisker the lowest
and highest single repetition; a ratio's whisker is the lowest and highest
ratio of single repetitions (the two sides of one repetition ran back to
back). Each plot_<bench>(raw, plots) writes its files into PLOTS and
returns [(file name, caption)]."""
import json
import os
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from table_lib import group_runs, insn_runs, ratio, raw_csv  # noqa: E402

WHISKERS = "bars: mean of %d repetitions; whiskers: lowest and highest repetition"
RATIO_WHISKERS = ("bars: ratio of the means of %d repetitions; whiskers: lowest and "
                  "highest ratio of single repetitions; dashed line: 1 (equal)")


def span(vals):
    """(mean, min, max) of a list of numbers, or None for no numbers."""
    vals = [v for v in vals if v == v]  # no nan (a value fio did not report)
    if not vals:
        return None
    return sum(vals) / len(vals), min(vals), max(vals)


def col(runs, key, i):
    """Column I of the repetitions in RUNS[KEY], [] when there are none."""
    return [r[i] for r in runs.get(key, [])]


def ratio_span(runs, a, b, i=0):
    """(ratio of means, lowest, highest per-repetition ratio) of column I of
    RUNS[A] over RUNS[B], or None."""
    if not runs.get(a) or not runs.get(b):
        return None
    m, per = ratio(runs[a], runs[b], i)
    per = [p for p in per if p == p]
    if m != m:
        return None
    return (m, per[0], per[-1]) if per else (m, m, m)


def bars(ax, groups, series, ylabel, title, hline=None, labels=None, markers=None, log=False):
    """Grouped bars: GROUPS are the x labels, SERIES [(label, [span or
    None per group])]. LABELS: a format for a value label on each bar.
    MARKERS: [(label, [value or None per group])] per series, drawn as a
    black tick over the series' bar (p99 latency). The y axis starts at 0
    and leaves room above the highest whisker for the legend (LOG: a log
    scale instead, from a tenth of the lowest bar)."""
    n = max(len(series), 1)
    width = 0.8 / n
    top = max([s[2] for _, stats in series for s in stats if s is not None] +
              [v for _, vals in (markers or []) for v in vals if v is not None] +
              [hline or 0, 0])
    entries = len(series) + bool(markers)
    ylim = top * (1.35 if entries <= 2 else 1.55) if top > 0 else 1
    low = min([s[0] for _, stats in series for s in stats if s is not None and s[0] > 0] + [top or 1])
    if markers and not log and top > 10 * low:
        # p99 far above the means (a loaded machine): a log scale keeps both readable.
        log = True
        title += " (log scale)"
    for i, (label, stats) in enumerate(series):
        pos = [(g + (i - (n - 1) / 2) * width, s) for g, s in enumerate(stats) if s is not None]
        if not pos:
            continue
        xs = [x for x, _ in pos]
        ys = [s[0] for _, s in pos]
        lo = [s[0] - s[1] for _, s in pos]
        hi = [s[2] - s[0] for _, s in pos]
        err = {}
        if any(lo) or any(hi):
            err = {"yerr": [lo, hi], "capsize": 3, "error_kw": {"elinewidth": 1}}
        ax.bar(xs, ys, width * 0.92, label=label, color="C%d" % i, **err)
        for x, s in pos if labels else ():
            # In the bar when it is tall enough, else above its whisker.
            if log:
                ax.text(x, s[2] * 1.15, labels % s[0], ha="center", va="bottom", fontsize=7)
            elif s[0] > 0.25 * ylim:
                ax.text(x, s[0] / 2, labels % s[0], ha="center", va="center", fontsize=8,
                        color="white", fontweight="bold", rotation=90 if n > 2 else 0)
            else:
                ax.text(x, s[2] + 0.02 * ylim, labels % s[0], ha="center", va="bottom",
                        fontsize=7, rotation=90 if n > 2 else 0)
        if markers:
            mlabel, mvals = markers[i]
            mx = [g + (i - (n - 1) / 2) * width for g, v in enumerate(mvals) if v is not None]
            my = [v for v in mvals if v is not None]
            ax.scatter(mx, my, marker="_", s=250, color="black", zorder=3,
                       label=mlabel if i == 0 else None)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if hline is not None:
        ax.axhline(hline, color="grey", linewidth=1, linestyle="--")
    if log:
        ax.set_yscale("log")
        ax.set_ylim(low / 10, top * 20 if top > 0 else 10)
    else:
        ax.set_ylim(0, ylim)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", ncol=2 if entries > 2 else 1)


def figure(rows, cols, width=5.2, height=3.6):
    """A figure with a ROWS x COLS grid of axes (always a 2-D array)."""
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + 0.8),
                             squeeze=False)
    return fig, axes


def save(fig, plots, name, title, note):
    """Title the figure, put NOTE under it, write PLOTS/NAME."""
    fig.suptitle(title, fontsize=12)
    fig.text(0.5, 0.005, note, ha="center", va="bottom", fontsize=8, color="dimgrey")
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    fig.savefig(os.path.join(plots, name), dpi=100)
    plt.close(fig)
    return name


def reps_note(runs):
    n = max((len(v) for v in runs.values()), default=0)
    if n == 1:
        return "one repetition: no range to show"
    return WHISKERS % n


def ratio_note(runs):
    n = max((len(v) for v in runs.values()), default=0)
    if n == 1:
        return "one repetition: no range to show; dashed line: 1 (equal)"
    return RATIO_WHISKERS % n


def uniq(rows, key):
    """The values of column KEY in order of first appearance."""
    return list(dict.fromkeys(r[key] for r in rows))


# --- poll ---------------------------------------------------------------

def plot_poll(raw, plots):
    rows = raw_csv(raw, "poll.csv")
    _, runs = group_runs(rows, ("backend", "qd"), "mode", ("iops", "lat_mean_us", "lat_p99_us"))
    backends, qds = uniq(rows, "backend"), sorted(uniq(rows, "qd"))
    modes = (("plain", "plain (interrupts)"), ("hipri", "hipri (polled)"))
    groups = ["QD %d" % q for q in qds]
    fig, ax = figure(2, len(backends))
    for c, b in enumerate(backends):
        bars(ax[0][c], groups, [(lab, [span(col(runs, (b, q, m), 0)) for q in qds])
                                for m, lab in modes],
             "IOPS", "%s disk: IOPS by queue depth" % b)
        bars(ax[1][c], groups, [(lab, [span(col(runs, (b, q, m), 1)) for q in qds])
                                for m, lab in modes],
             "mean latency (us)", "%s disk: latency by queue depth" % b,
             markers=[("p99 latency", [(span(col(runs, (b, q, m), 2)) or (None,))[0] for q in qds])
                      for m, _ in modes])
    out = [(save(fig, plots, "poll-iops-latency.png",
                 "virtio-blk, fio io_uring 4k random reads: plain vs hipri (poll queue)",
                 reps_note(runs)),
            "poll: IOPS and mean latency (p99 as a tick) by queue depth and mode")]
    fig, ax = figure(1, len(backends))
    for c, b in enumerate(backends):
        bars(ax[0][c], groups,
             [("IOPS hipri / plain", [ratio_span(runs, (b, q, "hipri"), (b, q, "plain"), 0) for q in qds]),
              ("mean latency hipri / plain", [ratio_span(runs, (b, q, "hipri"), (b, q, "plain"), 1) for q in qds])],
             "ratio hipri / plain", "%s disk" % b, hline=1, labels="x%.2f")
    out.append((save(fig, plots, "poll-ratio.png", "virtio-blk: polled / interrupt-driven",
                     ratio_note(runs)),
                "poll: hipri/plain ratios with their range over repetitions"))
    return out


# --- repoll -------------------------------------------------------------

def plot_repoll(raw, plots):
    changes = raw_csv(raw, "repoll-changes.csv")
    io = {r["load"]: r for r in raw_csv(raw, "repoll-io.csv")}
    fig, ax = figure(1, 2)
    a = ax[0][0]
    phases = (("idle", "idle disk"), ("under-io", "under QD1 random reads"))
    for i, (p, label) in enumerate(phases):
        v = [r["duration_us"] / 1e3 for r in changes if r["phase"] == p]
        a.scatter([i] * len(v), v, color="C%d" % i, alpha=0.7, label="%s (%d changes)" % (label, len(v)))
        if v:
            a.hlines(statistics.median(v), i - 0.25, i + 0.25, color="black")
    a.set_xticks(range(len(phases)))
    a.set_xticklabels([p[1] for p in phases])
    a.set_xlim(-0.6, len(phases) - 0.4)
    a.set_ylim(0, max([r["duration_us"] / 1e3 for r in changes] + [1]) * 1.35)
    a.set_ylabel("time of one change (ms)")
    a.set_title("write to num_poll_queues, each change (black: median)", fontsize=10)
    a.grid(axis="y", alpha=0.3)
    a.legend(fontsize=8)
    loads = (("no-changes", "no changes"), ("changes", "changes every 0.5 s"))
    metrics = (("lat_mean_us", "mean"), ("lat_p999_us", "p99.9"), ("lat_max_us", "max"))
    bars(ax[0][1], [m[1] for m in metrics],
         [(label, [(io[k][m] / 1e3,) * 3 if k in io else None for m, _ in metrics])
          for k, label in loads],
         "read latency (ms)", "QD1 random reads during the changes", labels="%.2f", log=True)
    return [(save(fig, plots, "repoll.png",
                  "changing a disk's num_poll_queues at runtime",
                  "one run; log scale on the right"),
             "repoll: time per change and the I/O pause it causes")]


# --- pt -----------------------------------------------------------------

PT_PATHS = (("vblk-bdev", "virtio-blk /dev/vdX"), ("vblk-pt", "virtio-blk /dev/vblk/vdX (pt)"),
            ("nvme-bdev", "NVMe /dev/nvmeXnY"), ("nvme-ng", "NVMe /dev/ngXnY (pt)"))


def plot_pt(raw, plots):
    rows = raw_csv(raw, "pt.csv")
    _, runs = group_runs(rows, ("backend", "qd", "mode"), "path", ("iops", "lat_mean_us", "lat_p99_us"))
    backends, qds, modes = uniq(rows, "backend"), sorted(uniq(rows, "qd")), uniq(rows, "mode")
    groups = ["QD %d" % q for q in qds]
    out = []
    for name, i, ylabel, what in (("pt-iops.png", 0, "IOPS", "IOPS"),
                                  ("pt-latency.png", 1, "mean latency (us)", "mean latency")):
        fig, ax = figure(len(modes), len(backends))
        for r, m in enumerate(modes):
            for c, b in enumerate(backends):
                markers = None
                if i == 1:
                    markers = [("p99 latency", [(span(col(runs, (b, q, m, p), 2)) or (None,))[0]
                                                for q in qds]) for p, _ in PT_PATHS]
                bars(ax[r][c], groups,
                     [(lab, [span(col(runs, (b, q, m, p), i)) for q in qds]) for p, lab in PT_PATHS],
                     ylabel, "%s, %s: %s" % (
                         b, "polled" if m == "poll" else "interrupt-driven", what),
                     markers=markers)
        out.append((save(fig, plots, name,
                         "fio 4k random reads: block device vs io_uring passthrough (pt)",
                         reps_note(runs)),
                    "pt: %s by queue depth, mode and path" % what))
    fig, ax = figure(1, len(backends), width=6.5)
    cells = [(q, m) for q in qds for m in modes]
    for c, b in enumerate(backends):
        bars(ax[0][c], ["QD %d %s" % cm for cm in cells],
             [("virtio-blk: vblk / vdX IOPS",
               [ratio_span(runs, (b, q, m, "vblk-pt"), (b, q, m, "vblk-bdev")) for q, m in cells]),
              ("NVMe: ngXnY / nvmeXnY IOPS",
               [ratio_span(runs, (b, q, m, "nvme-ng"), (b, q, m, "nvme-bdev")) for q, m in cells])],
             "IOPS ratio passthrough / block device", "%s backend" % b, hline=1, labels="x%.2f")
    out.append((save(fig, plots, "pt-ratio.png", "passthrough / block device, same device",
                     ratio_note(runs)),
                "pt: passthrough/block-device IOPS ratios with their range over repetitions"))
    return out


# --- ptcpu --------------------------------------------------------------

def plot_ptcpu(raw, plots):
    rows = raw_csv(raw, "ptcpu.csv")
    _, runs = group_runs(rows, ("qd", "batch", "mode"), "path",
                         ("iops", "cpu_us_per_io", "irqs_per_io"))
    cells = [(r["qd"], r["batch"], r["mode"]) for r in rows]
    cells = list(dict.fromkeys(cells))
    groups = ["QD %d/%d %s" % c for c in cells]
    fig, ax = figure(1, 3, width=6.0)
    bars(ax[0][0], groups, [(lab, [span(col(runs, c + (p,), 0)) for c in cells])
                            for p, lab in PT_PATHS], "IOPS", "IOPS")
    bars(ax[0][1], groups, [(lab, [span(col(runs, c + (p,), 1)) for c in cells])
                            for p, lab in PT_PATHS], "submitter CPU us per I/O",
         "guest CPU per I/O (perf task-clock)")
    bars(ax[0][2], groups,
         [("virtio-blk: vblk / vdX IOPS",
           [ratio_span(runs, c + ("vblk-pt",), c + ("vblk-bdev",)) for c in cells]),
          ("NVMe: ngXnY / nvmeXnY IOPS",
           [ratio_span(runs, c + ("nvme-ng",), c + ("nvme-bdev",)) for c in cells])],
         "IOPS ratio passthrough / block device", "passthrough / block device",
         hline=1, labels="x%.2f")
    return [(save(fig, plots, "ptcpu.png",
                  "t/io_uring on a vCPU with a host core of its own (QD/batch, mode)",
                  reps_note(runs) + "; ratios: " + ratio_note(runs)),
             "ptcpu: IOPS, submitter CPU per I/O and passthrough/block-device ratios")]


# --- vhost --------------------------------------------------------------

VHOST_PATHS = (("io_uring", "io_uring (fio, O_DIRECT)"), ("vhost-blk", "vhost-blk (vhost_blk_test)"),
               ("vhost-blk-bp", "vhost-blk, workers busy-poll"),
               ("vhost-blk-bp-poll", "vhost-blk busy-polling, driver polling"))


def plot_vhost(raw, plots):
    rows = raw_csv(raw, "vhost.csv")
    have = set(uniq(rows, "path"))
    cpu_cols = tuple(c for c in ("worker_cpu_us", "driver_cpu_us") if rows and c in rows[0])
    _, runs = group_runs(rows, ("backend", "qd", "queues", "workers"), "path",
                         ("iops", "lat_mean_us", "lat_p99_us") + cpu_cols)
    backends, qds = uniq(rows, "backend"), sorted(uniq(rows, "qd"))
    layouts = list(dict.fromkeys((r["queues"], r["workers"]) for r in rows))
    lnames = ["%d queue%s\n%d worker%s" % (q, "s" if q > 1 else "", w, "s" if w > 1 else "")
              for q, w in layouts]
    paths = [(p, lab) for p, lab in VHOST_PATHS if p in have]
    vpaths = [(p, lab) for p, lab in paths if p != "io_uring"]
    out = []
    for name, i, ylabel, what in (("vhost-iops.png", 0, "IOPS", "IOPS"),
                                  ("vhost-latency.png", 1, "mean latency (us)", "mean latency")):
        fig, ax = figure(len(qds), len(backends), width=6.5)
        for r, q in enumerate(qds):
            for c, b in enumerate(backends):
                markers = None
                if i == 1:
                    markers = [("p99 latency", [(span(col(runs, (b, q) + lw + (p,), 2)) or (None,))[0]
                                                for lw in layouts]) for p, _ in paths]
                bars(ax[r][c], lnames,
                     [(lab, [span(col(runs, (b, q) + lw + (p,), i)) for lw in layouts])
                      for p, lab in paths],
                     ylabel, "%s, QD %d: %s" % (b, q, what), markers=markers)
        out.append((save(fig, plots, name, "4k random reads: io_uring vs vhost-blk, same device",
                         reps_note(runs)),
                    "vhost: %s by queue depth, queues and workers" % what))
    fig, ax = figure(len(backends), 1, width=max(6.5, 0.9 * len(qds) * len(layouts)))
    cells = [(q,) + lw for q in qds for lw in layouts]
    for r, b in enumerate(backends):
        bars(ax[r][0], ["QD %d\n%dq %dw" % cell for cell in cells],
             [("IOPS %s / io_uring" % p,
               [ratio_span(runs, (b,) + cell + (p,), (b,) + cell + ("io_uring",), 0) for cell in cells])
              for p, _ in vpaths],
             "IOPS ratio to io_uring", "%s (q: queues, w: vhost workers)" % b,
             hline=1, labels="x%.2f")
    out.append((save(fig, plots, "vhost-ratio.png", "vhost-blk / io_uring IOPS", ratio_note(runs)),
                "vhost: vhost-blk/io_uring IOPS ratios, each way of running vhost-blk, with their "
                "range over repetitions"))
    if len(cpu_cols) == 2:
        fig, ax = figure(len(backends), 2, width=max(5.2, 0.6 * len(qds) * len(layouts)))
        for r, b in enumerate(backends):
            for c, (i, who) in enumerate(((3, "vhost workers"), (4, "driver threads"))):
                bars(ax[r][c], ["QD %d\n%dq %dw" % cell for cell in cells],
                     [(lab, [span(col(runs, (b,) + cell + (p,), i)) for cell in cells])
                      for p, lab in vpaths],
                     "CPU us per request", "%s: CPU of the %s" % (b, who))
        out.append((save(fig, plots, "vhost-cpu.png",
                         "CPU time per request: vhost workers and vhost_blk_test's driver threads",
                         reps_note(runs)),
                    "vhost: CPU per request of the vhost workers and of the driver, with and "
                    "without busy polling"))
    return out


VFSLAT_DEVICES = ("vufsd-1", "vufsd-2", "vufsd-4", "vufsd-2t4", "virtiofsd")


def plot_vfslat(raw, plots):
    rows = raw_csv(raw, "vfslat.csv")
    _, runs = group_runs(rows, ("cpus", "workload"), "device", ("iops", "lat_mean_us"))
    cpus, works = sorted(uniq(rows, "cpus")), uniq(rows, "workload")
    devs = [d for d in VFSLAT_DEVICES if d in set(uniq(rows, "device"))]
    fig, ax = figure(len(cpus), 2, width=7)
    for r, c in enumerate(cpus):
        bars(ax[r][0], works, [(d, [span(col(runs, (c, w, d), 0)) for w in works]) for d in devs],
             "IOPS (meta: rounds/s)", "%d vCPUs: throughput" % c)
        bars(ax[r][1], works,
             [(d, [ratio_span(runs, (c, w, d), (c, w, "vufsd-1"), 0) for w in works])
              for d in devs if d != "vufsd-1"],
             "ratio to vufsd-1", "%d vCPUs: IOPS / vufsd with 1 queue" % c, hline=1,
             labels="x%.2f")
    return [(save(fig, plots, "vfslat.png",
                  "virtio-fs where the back end waits (shares on the host's disk)",
                  reps_note(runs) + "; ratios: " + ratio_note(runs)),
             "vfslat: latency-bound workloads by device and vCPU count, with ratios to one queue")]


# --- bridge -------------------------------------------------------------

BRIDGE_DISKS = (("bridge", "bridge + vhost-blk"), ("bridge-w1", "bridge, one worker"),
                ("qemu", "QEMU virtio-blk"), ("iot1", "QEMU, 1 IOThread"),
                ("iotN", "QEMU, IOThread per queue"), ("qsd", "qemu-storage-daemon"))
BRIDGE_PAIRS = (("bridge", "qemu", "bridge / QEMU virtio-blk"),
                ("bridge", "qsd", "bridge / qemu-storage-daemon"),
                ("bridge-w1", "iot1", "one worker / one IOThread"),
                ("bridge", "iotN", "worker per queue / IOThread per queue"))


def plot_bridge(raw, plots):
    rows = raw_csv(raw, "bridge.csv")
    for r in rows:      # as bridge_table.py: iotN is the IOThread per queue
        if str(r["disk"]).startswith("iot") and r["disk"] != "iot1":
            r["disk"] = "iotN"
    _, runs = group_runs(rows, ("rw", "qd"), "disk", ("iops", "lat_mean_us", "lat_p99_us"))
    present = {k[2] for k in runs}
    disks = [(d, lab) for d, lab in BRIDGE_DISKS if d in present]
    rws, qds = uniq(rows, "rw"), sorted(uniq(rows, "qd"))
    groups = ["QD %d" % q for q in qds]
    fig, ax = figure(2, len(rws))
    for c, rw in enumerate(rws):
        bars(ax[0][c], groups, [(lab, [span(col(runs, (rw, q, d), 0)) for q in qds])
                                for d, lab in disks],
             "IOPS", "%s: IOPS by queue depth" % rw)
        bars(ax[1][c], groups, [(lab, [span([v / 1e3 for v in col(runs, (rw, q, d), 1)]) for q in qds])
                                for d, lab in disks],
             "mean latency (ms)", "%s: latency by queue depth" % rw)
    out = [(save(fig, plots, "bridge-iops-latency.png",
                 "second-level guest, fio io_uring 4k, %d disks on one brd device" % len(disks),
                 reps_note(runs)),
            "bridge: IOPS and mean latency in the second-level guest by queue depth and disk")]
    cells = [(rw, q) for rw in rws for q in qds]
    fig, ax = figure(1, 1, width=8)
    bars(ax[0][0], ["%s QD %d" % cell for cell in cells],
         [(lab, [ratio_span(runs, cell + (a,), cell + (b,)) for cell in cells])
          for a, b, lab in BRIDGE_PAIRS if a in present and b in present],
         "IOPS ratio", "IOPS of the bridge's disk over the others'", hline=1, labels="x%.2f")
    out.append((save(fig, plots, "bridge-ratio.png", "vhost-user-blk bridge + vhost-blk vs the others",
                     ratio_note(runs)),
                "bridge: IOPS ratios with their range over repetitions"))
    return out


# --- virtiofs -----------------------------------------------------------

def plot_virtiofs(raw, plots):
    rows = raw_csv(raw, "virtiofs.csv")
    devs = uniq(rows, "device")
    one, ref = "vufsd-1", "virtiofsd"
    many = [d for d in devs if d.startswith("vufsd-") and d != one][0]
    refs = [ref] + [d for d in devs if d.startswith(ref + "-")]
    devs = [one, many] + refs
    _, runs = group_runs(rows, ("rw", "bs"), "device", ("bw_mib_s", "iops", "lat_mean_us"))
    work = list(dict.fromkeys((r["rw"], r["bs"]) for r in rows))
    fig, ax = figure(2, len(work), width=3.6)
    for c, w in enumerate(work):
        bars(ax[0][c], [""], [(d, [span(col(runs, w + (d,), 0))]) for d in devs],
             "MiB/s", "%s %s: throughput" % w)
        bars(ax[1][c], [""], [(d, [span(col(runs, w + (d,), 2))]) for d in devs],
             "mean latency (us)", "%s %s: latency" % w)
    out = [(save(fig, plots, "virtiofs-throughput.png",
                 "virtio-fs, fio O_DIRECT, a job per vCPU: vufsd (1 and N queues) vs virtiofsd",
                 reps_note(runs)),
            "virtiofs: throughput and mean latency per workload and device")]
    cells = ["%s %s" % w for w in work]
    fig, ax = figure(1, 1, width=8)
    bars(ax[0][0], cells,
         [("%s / %s" % (a, b), [ratio_span(runs, w + (a,), w + (b,)) for w in work])
          for a, b in [(many, one)] + [(one, r) for r in refs] + [(many, r) for r in refs[1:]]],
         "MiB/s ratio", "more queues, and vufsd against virtiofsd", hline=1, labels="x%.2f")
    out.append((save(fig, plots, "virtiofs-ratio.png", "virtio-fs throughput ratios",
                     ratio_note(runs)),
                "virtiofs: throughput ratios with their range over repetitions"))
    qpath = os.path.join(raw, "virtiofs-queues.csv")
    if os.path.exists(qpath):
        queues = raw_csv(raw, "virtiofs-queues.csv")
        with open(os.path.join(raw, "virtiofs-daemons.json")) as f:
            daemons = json.load(f)
        tags = uniq(queues, "daemon")
        fig, ax = figure(1, len(tags), width=4.5)
        for c, tag in enumerate(tags):
            qs = [r for r in queues if r["daemon"] == tag]
            total = sum(r["requests"] for r in qs) or 1
            a = ax[0][c]
            cont = a.bar(range(len(qs)), [r["requests"] for r in qs],
                         color=["lightgrey" if r["queue"] == 0 else "C%d" % c for r in qs])
            a.bar_label(cont, labels=["%d\n(%.1f%%)" % (r["requests"], 100 * r["requests"] / total)
                                      for r in qs], fontsize=7, padding=2)
            a.set_xticks(range(len(qs)))
            a.set_xticklabels(["vq %d\n%s" % (r["queue"], "hiprio" if r["queue"] == 0 else "requests")
                               for r in qs])
            a.set_ylabel("requests served (whole run)")
            a.set_title("%s: %d requests, daemon CPU %.1f s" % (
                tag, total, daemons.get(tag, {}).get("cpu_us", 0) / 1e6), fontsize=10)
            a.set_ylim(0, max(r["requests"] for r in qs) * 1.25 or 1)
            a.grid(axis="y", alpha=0.3)
        out.append((save(fig, plots, "virtiofs-queues.png",
                         "vufsd: requests per virtqueue (daemon counters)",
                         "vq 0 is the hiprio queue; the guest maps each CPU to one request queue"),
                    "virtiofs: per-queue spread of the requests, from vufsd's counters"))
    return out


# --- irqbatch -----------------------------------------------------------

def plot_irqbatch(raw, plots):
    rows = raw_csv(raw, "irqbatch.csv")
    _, runs = group_runs(rows, ("qd",), "batch", ("iops", "lat_mean_us", "cpu_us_per_io"))
    qds = uniq(rows, "qd")
    groups = ["QD%d" % q for q in qds]
    fig, ax = figure(1, 3, width=4.6)
    bars(ax[0][0], groups, [(lab, [span(col(runs, (q, b), 0)) for q in qds])
                            for b, lab in ((0, "irq_batch=0"), (1, "irq_batch=1"))],
         "IOPS (all disks)", "throughput", log=True)
    bars(ax[0][1], groups, [(lab, [span(col(runs, (q, b), 2)) for q in qds])
                            for b, lab in ((0, "irq_batch=0"), (1, "irq_batch=1"))],
         "fio CPU us per I/O", "CPU per I/O")
    bars(ax[0][2], groups,
         [("IOPS", [ratio_span(runs, (q, 1), (q, 0), 0) for q in qds]),
          ("mean latency", [ratio_span(runs, (q, 1), (q, 0), 1) for q in qds])],
         "batch on / off", "ratios", hline=1, labels="x%.2f")
    return [(save(fig, plots, "irqbatch.png",
                  "virtio-blk completion batching on the interrupt path, on and off in one boot",
                  reps_note(runs) + "; ratios: " + ratio_note(runs)),
             "irqbatch: interrupt-driven IOPS, CPU per I/O and on/off ratios by queue depth")]


# --- instructions per I/O (every benchmark that counts them) --------------

# Per benchmark: the counts' file, the configuration's columns, the column
# compared within one, and how a configuration is labelled.
INSN_PLOTS = {
    "poll": ("poll-insns.csv", ("backend", "qd"), "mode", "%s QD%d"),
    "pt": ("pt-insns.csv", ("backend", "qd", "mode"), "path", "%s QD%d %s"),
    "ptcpu": ("ptcpu-insns.csv", ("qd", "batch", "mode"), "path", "QD%d/%d %s"),
    "vhost": ("vhost-insns.csv", ("backend", "qd", "queues", "workers"), "path", "%s QD%d %dq %dw"),
    "virtiofs": ("virtiofs-insns.csv", ("rw", "bs"), "device", "%s %s"),
    "irqbatch": ("irqbatch-insns.csv", ("qd",), "batch", "QD%d"),
    "vfslat": ("vfslat-insns.csv", ("cpus", "workload"), "device", "%d vCPUs %s"),
    # The first-level guest's instructions per second-level I/O.
    "bridge": ("bridge-insns.csv", ("rw", "qd"), "disk", "%s QD%d"),
}


def plot_insns(name, raw, plots):
    """Guest instructions per I/O, storage stack and whole kernel, by
    configuration and variant, when the run counted them."""
    fname, keys, variant, label = INSN_PLOTS[name]
    path = os.path.join(raw, fname)
    runs = insn_runs(raw, fname, keys, variant)
    if not runs:
        return []
    rows = raw_csv(raw, fname)
    cells = list(dict.fromkeys(tuple(r[k] for k in keys) for r in rows))
    variants = uniq(rows, variant)
    groups = [label % c for c in cells]
    width = max(5.5, 0.9 * len(cells) * max(1, len(variants) / 2))
    fig, ax = figure(2, 1, width=min(width, 18))
    for i, (what, title) in enumerate(((0, "storage stack"), (1, "whole kernel, every vCPU"))):
        bars(ax[i][0], groups,
             [("%s=%s" % (variant, v), [span(col(runs, c + (v,), what)) for c in cells])
              for v in variants],
             "guest instructions per I/O", title)
    return [(save(fig, plots, "%s-insns.png" % name,
                  "%s: guest instructions per I/O (insncount, a boot of their own)" % name,
                  reps_note(runs) + "; " + os.path.basename(path)),
             "%s: guest instructions per I/O, storage stack and whole kernel" % name)]


PLOTTERS = {
    "poll": plot_poll,
    "repoll": plot_repoll,
    "pt": plot_pt,
    "ptcpu": plot_ptcpu,
    "vhost": plot_vhost,
    "bridge": plot_bridge,
    "virtiofs": plot_virtiofs,
    "vfslat": plot_vfslat,
    "irqbatch": plot_irqbatch,
    # Two ratios and a few counts: the table is the whole story.
    "insncount": lambda raw, plots: [],
}


def plot(name, raw, plots):
    """Plots of benchmark NAME: [(file name, caption)]."""
    os.makedirs(plots, exist_ok=True)
    out = PLOTTERS[name](raw, plots)
    if name in INSN_PLOTS:
        out += plot_insns(name, raw, plots)
    return out

