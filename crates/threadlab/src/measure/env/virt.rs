//! Virtualisation and containers: DMI, the CPUID hypervisor leaf, /sys/hypervisor, and the
//! marks container runtimes leave.

use std::path::Path;

use super::cpu::CpuInfo;
use super::{read, read_trim};

pub(super) struct Virt {
    pub(super) virtualized: Option<bool>,
    pub(super) hypervisor: Option<String>,
    pub(super) cpuid_vendor: Option<String>,
    pub(super) dmi_system: Option<String>,
    pub(super) container: Option<String>,
}

pub(super) fn detect_virtualization(cpuinfo: &CpuInfo) -> Virt {
    let flag = cpuinfo.flags.iter().any(|f| f == "hypervisor");
    let cpuid_vendor = if flag {
        cpuid_hypervisor_vendor()
    } else {
        None
    };
    let cpuid_name = cpuid_vendor
        .as_deref()
        .and_then(hypervisor_from_cpuid_vendor);

    let dmi_vendor = read_trim("/sys/class/dmi/id/sys_vendor");
    let dmi_product = read_trim("/sys/class/dmi/id/product_name");
    let dmi_system = match (&dmi_vendor, &dmi_product) {
        (None, None) => None,
        (v, p) => Some(format!(
            "{} / {}",
            v.as_deref().unwrap_or("?"),
            p.as_deref().unwrap_or("?")
        )),
    };
    let dmi_name = hypervisor_from_dmi(
        dmi_vendor.as_deref().unwrap_or(""),
        dmi_product.as_deref().unwrap_or(""),
    );
    let sys_hv =
        read_trim("/sys/hypervisor/type").map(|t| if t == "xen" { "Xen".to_string() } else { t });
    let wsl = read("/proc/version")
        .map(|v| v.to_ascii_lowercase().contains("microsoft"))
        .unwrap_or(false);

    let hypervisor = match (cpuid_name.or(sys_hv), dmi_name) {
        (Some(c), Some(d)) if c == d || c.starts_with(&d) => Some(c),
        (Some(c), Some(d)) => Some(format!("{c} ({d})")),
        (Some(c), None) => Some(c),
        (None, Some(d)) => Some(d),
        (None, None) if wsl => Some("Hyper-V (WSL2)".to_string()),
        (None, None) if flag => Some("unknown hypervisor".to_string()),
        (None, None) => None,
    };
    let x86 = cfg!(any(target_arch = "x86", target_arch = "x86_64"));
    let virtualized = if flag || hypervisor.is_some() {
        Some(true)
    } else if x86 && !cpuinfo.flags.is_empty() {
        Some(false)
    } else {
        None
    };

    let container = if Path::new("/.dockerenv").exists() {
        Some("docker (/.dockerenv)".to_string())
    } else if Path::new("/run/.containerenv").exists() {
        Some("podman (/run/.containerenv)".to_string())
    } else if let Some(c) = std::env::var("container").ok().filter(|c| !c.is_empty()) {
        Some(format!("{c} ($container)"))
    } else {
        read("/proc/1/cgroup")
            .as_deref()
            .and_then(container_from_cgroup)
    };

    Virt {
        virtualized,
        hypervisor,
        cpuid_vendor,
        dmi_system,
        container,
    }
}

#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor_vendor() -> Option<String> {
    #[allow(unused_unsafe)]
    // SAFETY: CPUID is available on every x86_64 CPU, and leaf 0x40000000 is reserved for
    // hypervisors (only queried when the hypervisor flag is set); it has no side effects.
    let r = unsafe { core::arch::x86_64::__cpuid(0x4000_0000) };
    let mut bytes = Vec::with_capacity(12);
    for reg in [r.ebx, r.ecx, r.edx] {
        bytes.extend_from_slice(&reg.to_le_bytes());
    }
    let s: String = bytes
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    let s = s.trim().to_string();
    (!s.is_empty()).then_some(s)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor_vendor() -> Option<String> {
    None
}

/// Platform name from DMI sys_vendor and product_name; `None` for bare metal or unknown.
fn hypervisor_from_dmi(vendor: &str, product: &str) -> Option<String> {
    let v = vendor.trim();
    let p = product.trim();
    let vl = v.to_ascii_lowercase();
    let pl = p.to_ascii_lowercase();
    let name = if vl == "amazon ec2" {
        if pl.contains(".metal") {
            return None;
        }
        "Amazon EC2"
    } else if vl == "google" || pl == "google compute engine" {
        "Google Compute Engine"
    } else if vl == "microsoft corporation" && pl == "virtual machine" {
        "Hyper-V"
    } else if vl.contains("vmware") || pl.contains("vmware") {
        "VMware"
    } else if vl == "xen" || pl.contains("hvm domu") {
        "Xen"
    } else if vl == "qemu" || pl.contains("kvm") || pl.starts_with("standard pc") {
        if pl.contains("kvm") {
            "KVM"
        } else {
            "QEMU"
        }
    } else if pl == "virtualbox" || vl == "innotek gmbh" {
        "VirtualBox"
    } else if vl.contains("parallels") {
        "Parallels"
    } else if vl == "bhyve" || pl == "bhyve" {
        "bhyve"
    } else if vl == "openstack foundation" || pl.contains("openstack") {
        "OpenStack"
    } else if vl == "digitalocean" {
        "DigitalOcean"
    } else if vl == "hetzner" {
        "Hetzner Cloud"
    } else if vl == "alibaba cloud" {
        "Alibaba Cloud"
    } else if vl == "oracle corporation" && pl.contains("virtualbox") {
        "VirtualBox"
    } else {
        return None;
    };
    Some(name.to_string())
}

/// Hypervisor name from the CPUID leaf 0x40000000 vendor string.
fn hypervisor_from_cpuid_vendor(vendor: &str) -> Option<String> {
    let name = match vendor.trim_end_matches('\0').trim() {
        "KVMKVMKVM" => "KVM",
        "Linux KVM Hv" => "KVM (Hyper-V enlightenments)",
        "Microsoft Hv" => "Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" => "Xen",
        "TCGTCGTCGTCG" => "QEMU (TCG emulation)",
        "ACRNACRNACRN" => "ACRN",
        "bhyve bhyve" => "bhyve",
        "VBoxVBoxVBox" => "VirtualBox",
        "lrpepyh  vr" | "prl hyperv" => "Parallels",
        "QNXQVMBSQG" => "QNX",
        "" => return None,
        other => return Some(other.to_string()),
    };
    Some(name.to_string())
}

/// Container runtime from /proc/1/cgroup contents.
fn container_from_cgroup(s: &str) -> Option<String> {
    let checks = [
        ("kubepods", "kubernetes"),
        ("docker", "docker"),
        ("containerd", "containerd"),
        ("libpod", "podman"),
        ("lxc", "lxc"),
        ("garden", "garden"),
    ];
    checks
        .iter()
        .find(|(needle, _)| s.contains(needle))
        .map(|(_, name)| format!("{name} (/proc/1/cgroup)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dmi() {
        let h = |v, p| hypervisor_from_dmi(v, p);
        assert_eq!(
            h("QEMU", "Standard PC (Q35 + ICH9, 2009)").as_deref(),
            Some("QEMU")
        );
        assert_eq!(h("Red Hat", "KVM").as_deref(), Some("KVM"));
        assert_eq!(h("Amazon EC2", "m5.large").as_deref(), Some("Amazon EC2"));
        assert_eq!(h("Amazon EC2", "c5.metal"), None);
        assert_eq!(
            h("Google", "Google Compute Engine").as_deref(),
            Some("Google Compute Engine")
        );
        assert_eq!(
            h("Microsoft Corporation", "Virtual Machine").as_deref(),
            Some("Hyper-V")
        );
        assert_eq!(h("Microsoft Corporation", "Surface Laptop 4"), None);
        assert_eq!(
            h("VMware, Inc.", "VMware Virtual Platform").as_deref(),
            Some("VMware")
        );
        assert_eq!(h("Xen", "HVM domU").as_deref(), Some("Xen"));
        assert_eq!(
            h("innotek GmbH", "VirtualBox").as_deref(),
            Some("VirtualBox")
        );
        assert_eq!(h("Dell Inc.", "PowerEdge R740"), None);
        assert_eq!(h("", ""), None);
    }

    #[test]
    fn cpuid_vendor_names() {
        let h = hypervisor_from_cpuid_vendor;
        assert_eq!(h("KVMKVMKVM").as_deref(), Some("KVM"));
        assert_eq!(h("KVMKVMKVM\0\0\0").as_deref(), Some("KVM"));
        assert_eq!(h("Microsoft Hv").as_deref(), Some("Hyper-V"));
        assert_eq!(h("VMwareVMware").as_deref(), Some("VMware"));
        assert_eq!(h("XenVMMXenVMM").as_deref(), Some("Xen"));
        assert_eq!(h("TCGTCGTCGTCG").as_deref(), Some("QEMU (TCG emulation)"));
        assert_eq!(h("ACRNACRNACRN").as_deref(), Some("ACRN"));
        assert_eq!(h("NewHypervisor").as_deref(), Some("NewHypervisor"));
        assert_eq!(h(""), None);
    }

    #[test]
    fn containers() {
        assert_eq!(
            container_from_cgroup("12:cpu:/docker/0123abcd\n").as_deref(),
            Some("docker (/proc/1/cgroup)")
        );
        assert_eq!(
            container_from_cgroup("0::/kubepods/burstable/pod1/abc\n").as_deref(),
            Some("kubernetes (/proc/1/cgroup)")
        );
        assert_eq!(container_from_cgroup("0::/init.scope\n"), None);
    }
}
