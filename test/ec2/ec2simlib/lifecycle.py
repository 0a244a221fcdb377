"""Instance state changes: pending -> running when the cell boots, shutting-down ->
terminated when it is torn down. Work runs on background threads so API calls return at once,
as EC2's do."""

import ipaddress
import threading
import time

from .cells import CellError


class IpPool:
    """Private addresses for instances that boot no cell."""

    def __init__(self, cidr):
        self._hosts = ipaddress.ip_network(cidr).hosts()
        self._lock = threading.Lock()
        next(self._hosts, None)  # leave the first host (a gateway) alone

    def take(self):
        with self._lock:
            addr = next(self._hosts, None)
        if addr is None:
            raise RuntimeError("the private address pool is exhausted")
        return str(addr)


class Lifecycle:
    def __init__(self, store, catalog, cells, ip_pool, cfg, log):
        self.store = store
        self.catalog = catalog
        self.cells = cells
        self.ip_pool = ip_pool
        self.cfg = cfg
        self.log = log
        self._boot_slots = threading.BoundedSemaphore(max(1, cfg.boot_parallel))

    def _size(self, inst):
        if self.catalog.get(inst.instance_type) is None:
            return 1, 512
        return self.catalog.vcpus(inst.instance_type), \
            self.catalog.memory_mib(inst.instance_type)

    def _spawn(self, fn, *args):
        threading.Thread(target=fn, args=args, daemon=True).start()

    def start(self, inst):
        """Begin booting a freshly launched instance."""
        with self.store.lock:
            inst.booting = True
        self._spawn(self._boot, inst)

    def _boot(self, inst):
        if self.cfg.boot_delay > 0:
            time.sleep(self.cfg.boot_delay)
        ip = cell_id = None
        failure = None
        if self.cells is None:
            ip = self.ip_pool.take()
        else:
            with self._boot_slots:
                with self.store.lock:
                    still_wanted = inst.state == "pending"
                if still_wanted:
                    cpus, mib = self._size(inst)
                    try:
                        ip, cell_id = self.cells.launch(inst, cpus, mib, self.cfg.cluster_tag)
                    except (CellError, OSError) as e:
                        failure = str(e)
                        self.log(f"{inst.id}: boot failed: {failure}")
        teardown = False
        with self.store.lock:
            inst.booting = False
            if failure is not None:
                inst.set_state("terminated", ("Server.InternalError",
                                              "Server.InternalError: Internal error on launch"))
                return
            if ip is not None and cell_id is not None:
                inst.cell_booted = True
                inst.cell_id = cell_id
            if ip is not None:
                inst.private_ip = ip
            if inst.state == "pending":
                inst.set_state("running")
                self.log(f"{inst.id}: running at {ip}")
                return
            teardown = True   # terminated while booting
        if teardown:
            self._teardown(inst, None)

    def terminate(self, inst):
        """TerminateInstances on one instance (store lock held): the previous state."""
        previous = inst.state_xml()
        if inst.state in ("pending", "running", "stopping", "stopped"):
            inst.set_state("shutting-down", ("Client.UserInitiatedShutdown",
                                             "Client.UserInitiatedShutdown: User initiated "
                                             "shutdown"))
            inst.transition_reason = "User initiated"
            if not inst.booting:
                self._spawn(self._teardown, inst, None)
        return previous

    def _teardown(self, inst, final_reason):
        if inst.cell_booted and self.cells is not None:
            cpus, mib = self._size(inst)
            try:
                self.cells.terminate(inst, cpus, mib, self.cfg.cluster_tag)
            except (CellError, OSError) as e:
                self.log(f"{inst.id}: terminate command failed: {e}")
        if self.cfg.terminate_delay > 0:
            time.sleep(self.cfg.terminate_delay)
        with self.store.lock:
            inst.cell_booted = False
            inst.set_state("terminated", final_reason)
        self.log(f"{inst.id}: terminated")

    def kill(self, inst, keep_state=False):
        """Kill an instance's cell underneath it: EC2 then reports it terminated (as after a
        host failure or a spot interruption), or, with keep_state, still running."""
        if inst.cell_booted and self.cells is not None:
            cpus, mib = self._size(inst)
            try:
                self.cells.terminate(inst, cpus, mib, self.cfg.cluster_tag)
            except (CellError, OSError) as e:
                self.log(f"{inst.id}: terminate command failed: {e}")
        with self.store.lock:
            inst.cell_booted = False
            if not keep_state and inst.state != "terminated":
                inst.set_state("terminated", ("Server.InternalError",
                                              "Server.InternalError: the instance's host "
                                              "failed"))

    def shutdown(self):
        """Tear down every cell still up (on exit)."""
        with self.store.lock:
            live = [i for i in self.store.instances.values() if i.cell_booted]
        for inst in live:
            cpus, mib = self._size(inst)
            try:
                self.cells.terminate(inst, cpus, mib, self.cfg.cluster_tag)
            except (CellError, OSError) as e:
                self.log(f"{inst.id}: terminate command failed: {e}")
