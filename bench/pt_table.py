#!/usr/bin/env python3
"""Format bench/guest/pt.sh results, one line per fio run:
"<backend> <qd> <poll> <path> <iops> <lat_mean_us> <lat_p99_us>",
into a table of means with passthrough/block-device ratios per device."""
import sys

from table_lib import mean, read_runs

order, runs = read_runs(sys.argv[1], 7, 3)


names = {
    "vblk-bdev": "virtio-blk /dev/vdX",
    "vblk-pt": "virtio-blk /dev/vblk/vdX",
    "nvme-bdev": "NVMe /dev/nvmeXnY",
    "nvme-ng": "NVMe /dev/ngXnY",
}
reps = len(next(iter(runs.values())))
print("fio randread 4k, io_uring (block devices) vs io_uring_cmd "
      "(passthrough), same boot and backends, mean of %d" % reps)
hdr = "%-7s %2s %-5s %-26s %8s %8s %8s  %s" % (
    "backend", "QD", "mode", "path", "IOPS", "mean us", "p99 us",
    "passthrough / block device")
print(hdr)
print("-" * len(hdr))
for backend, qd, poll in order:
    for dev in ("vblk", "nvme"):
        bdev = runs[(backend, qd, poll, dev + "-bdev")]
        ptp = "pt" if dev == "vblk" else "ng"
        pt = runs[(backend, qd, poll, dev + "-" + ptp)]
        for path, rows in ((dev + "-bdev", bdev), (dev + "-" + ptp, pt)):
            ratio = ""
            if rows is pt:
                ratio = "IOPS x%.2f, mean lat x%.2f, p99 x%.2f" % (
                    mean(pt, 0) / mean(bdev, 0), mean(pt, 1) / mean(bdev, 1),
                    mean(pt, 2) / mean(bdev, 2))
            print("%-7s %2d %-5s %-26s %8.0f %8.1f %8.1f  %s" % (
                backend, qd, "poll" if poll else "irq", names[path],
                mean(rows, 0), mean(rows, 1), mean(rows, 2), ratio))
    vpt = runs[(backend, qd, poll, "vblk-pt")]
    ng = runs[(backend, qd, poll, "nvme-ng")]
    print("%-7s %2d %-5s %-26s %8s %8s %8s  virtio-blk pt / NVMe ng: IOPS x%.2f" % (
        backend, qd, "poll" if poll else "irq", "", "", "", "",
        mean(vpt, 0) / mean(ng, 0)))
