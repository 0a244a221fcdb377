"""Command line: parse flags, start the server, print the endpoint, serve until a signal."""

import json
import os
import signal
import sys
import threading

from . import config, imds
from .catalog import CatalogError
from .server import Server, Sim


def main(argv=None):
    cfg = config.parse(sys.argv[1:] if argv is None else argv)
    try:
        sim = Sim(cfg)
    except (CatalogError, OSError) as e:
        print(f"ec2sim: {e}", file=sys.stderr)
        return 2
    try:
        server = Server((cfg.listen, cfg.port), sim)
    except OSError as e:
        print(f"ec2sim: cannot listen on {cfg.listen}:{cfg.port}: {e}", file=sys.stderr)
        return 2
    imds_url = None
    if cfg.imds_listen:
        try:
            imds_server = imds.serve(sim.imds, cfg.imds_listen)
        except (OSError, ValueError) as e:
            print(f"ec2sim: cannot serve the metadata service on {cfg.imds_listen}: {e}",
                  file=sys.stderr)
            return 2
        imds_url = "http://%s:%d" % imds_server.server_address[:2]
    host, port = server.server_address[:2]
    if cfg.port_file:
        tmp = cfg.port_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{port}\n")
        os.replace(tmp, cfg.port_file)
    print(json.dumps({"endpoint": f"http://{host}:{port}", "region": cfg.region,
                      "access_keys": sorted(cfg.keys), "work_dir": cfg.work_dir,
                      "imds": imds_url}), flush=True)

    def stop(_signum, _frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        if cfg.boot_cmd and not cfg.keep_cells_on_exit:
            sim.lifecycle.shutdown()
    return 0
