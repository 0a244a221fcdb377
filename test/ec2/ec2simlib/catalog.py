"""Instance types and prices of one region, from the project's instance catalog JSON.

The catalog ({"<region>": [{"instanceType", "cpu", "memory" (GiB), "gpu", "burstable",
"baseline", "price", "spotPrice", "generation", "arch"}]}, or for a region derived from
another {"<region>": {"from": "<region>", "priceFactor": f}}) feeds DescribeInstanceTypes,
DescribeSpotPriceHistory and the vCPUs and memory given to booted cells.
"""

import json
import re

_FAMILY_RE = re.compile(r"^([a-z]+)([0-9]+)([a-z-]*)\.")
_XEN_FAMILIES = {"t2", "m4", "m3", "c4", "c3", "r4", "r3", "x1", "x1e", "p2", "p3", "g3",
                 "g3s", "i3", "d2", "h1", "f1"}
_GPU_NAMES = {"p2": ("K80", 12288), "p3": ("V100", 16384), "p3dn": ("V100", 32768),
              "p4d": ("A100", 40960), "g3": ("M60", 8192), "g3s": ("M60", 8192),
              "g4dn": ("T4", 16384), "g4ad": ("Radeon Pro V520", 8192),
              "g5": ("A10G", 24576)}


class CatalogError(Exception):
    pass


class Catalog:
    """The instance types of one region."""

    def __init__(self, path, region):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if region not in data:
            raise CatalogError(f"region {region} is not in {path}; it has: "
                               + ", ".join(sorted(data)))
        self.region = region
        self.regions = sorted(data)
        self.types = {}
        entries, factor = data[region], 1.0
        if isinstance(entries, dict):
            factor = float(entries["priceFactor"])
            entries = data[entries["from"]]
        for entry in entries:
            e = dict(entry)
            for key in ("price", "spotPrice"):
                if key in e:
                    e[key] = e[key] * factor
            self.types[e["instanceType"]] = e

    def get(self, name):
        return self.types.get(name)

    def names(self):
        return sorted(self.types)

    def vcpus(self, name):
        return int(self.types[name]["cpu"])

    def memory_mib(self, name):
        return int(round(float(self.types[name]["memory"]) * 1024))

    def spot_price(self, name):
        price = self.types[name].get("spotPrice")
        return float(price) if price else None

    def architecture(self, name):
        """The catalog's architecture of the type; without one, x86_64, or arm64 for
        Graviton families (a1, and families with a 'g' suffix)."""
        arch = self.types.get(name, {}).get("arch")
        if arch:
            return arch[0]
        m = _FAMILY_RE.match(name)
        if name.startswith("a1."):
            return "arm64"
        if m and "g" in m.group(3):
            return "arm64"
        return "x86_64"

    def info(self, name):
        """The DescribeInstanceTypes item of an instance type."""
        e = self.types[name]
        cpu = int(e["cpu"])
        arch = self.architecture(name)
        threads = 2 if arch == "x86_64" and cpu >= 2 else 1
        m = _FAMILY_RE.match(name)
        family = (m.group(1) + m.group(2) + m.group(3)) if m else name.split(".")[0]
        metal = name.endswith(".metal")
        usage = ["on-demand"] + (["spot"] if e.get("spotPrice") else [])
        item = {
            "instanceType": name,
            "currentGeneration": e.get("generation", "current") == "current",
            "freeTierEligible": name in ("t2.micro", "t3.micro"),
            "supportedUsageClasses": usage,
            "supportedRootDeviceTypes": ["ebs"],
            "supportedVirtualizationTypes": ["hvm"],
            "bareMetal": metal,
            "hypervisor": None if metal else (
                "xen" if family in _XEN_FAMILIES else "nitro"),
            "processorInfo": {"supportedArchitectures": [arch]},
            "vCpuInfo": {"defaultVCpus": cpu, "defaultCores": max(1, cpu // threads),
                         "defaultThreadsPerCore": threads},
            "memoryInfo": {"sizeInMiB": self.memory_mib(name)},
            "instanceStorageSupported": "d" in (m.group(3) if m else ""),
            "ebsInfo": {"ebsOptimizedSupport": "default", "encryptionSupport": "supported",
                        "nvmeSupport": "required" if family not in _XEN_FAMILIES
                        else "unsupported"},
            "networkInfo": {"networkPerformance": "Up to 5 Gigabit",
                            "maximumNetworkInterfaces": 2 if cpu <= 2 else 4,
                            "ipv4AddressesPerInterface": 4 if cpu <= 2 else 15,
                            "ipv6Supported": True, "enaSupport": "required"},
            "gpuInfo": None,
            "placementGroupInfo": {"supportedStrategies": ["partition", "spread"]},
            "hibernationSupported": False,
            "burstablePerformanceSupported": bool(e.get("burstable")),
            "dedicatedHostsSupported": not bool(e.get("burstable")),
            "autoRecoverySupported": True,
            "supportedBootModes": ["legacy-bios", "uefi"] if arch == "x86_64" else ["uefi"],
        }
        gpus = int(e.get("gpu") or 0)
        if gpus > 0:
            gname, gmem = _GPU_NAMES.get(family, ("GPU", 16384))
            manufacturer = "AMD" if family == "g4ad" else "NVIDIA"
            item["gpuInfo"] = {"gpus": [{"name": gname, "manufacturer": manufacturer,
                                         "count": gpus, "memoryInfo": {"sizeInMiB": gmem}}],
                               "totalGpuMemoryInMiB": gmem * gpus}
        return item
