//! Control groups: the CPU quota and the task limit (each the tightest along our path, cgroup
//! v2 or v1) and the effective cpuset.

use std::path::{Path, PathBuf};

use super::{read, read_trim};

/// cgroup v2 cpu.max: "max 100000" -> (None, 100000); "200000 100000" -> (Some(200000), 100000).
fn parse_cpu_max(s: &str) -> Option<(Option<u64>, u64)> {
    let mut it = s.split_whitespace();
    let quota = it.next()?;
    let period: u64 = match it.next() {
        Some(p) => p.parse().ok()?,
        None => 100_000,
    };
    if it.next().is_some() || period == 0 {
        return None;
    }
    let quota = if quota == "max" {
        None
    } else {
        Some(quota.parse().ok()?)
    };
    Some((quota, period))
}

/// cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us: quota "-1" means no limit.
fn parse_cfs_v1(quota: &str, period: &str) -> Option<(Option<u64>, u64)> {
    let quota: i64 = quota.trim().parse().ok()?;
    let period: u64 = period.trim().parse().ok()?;
    if period == 0 {
        return None;
    }
    let quota = if quota < 0 {
        None
    } else {
        Some(u64::try_from(quota).ok()?)
    };
    Some((quota, period))
}

/// Quota in CPUs from (quota, period).
fn quota_cpus(q: (Option<u64>, u64)) -> Option<f64> {
    match q {
        (Some(quota), period) if period > 0 => Some(quota as f64 / period as f64),
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq)]
struct CgroupEntry {
    controllers: Vec<String>,
    path: String,
}

/// /proc/self/cgroup lines "hierarchy-id:controller,list:path"; v2 has id 0 and an empty list.
fn parse_proc_cgroup(s: &str) -> Vec<CgroupEntry> {
    s.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let _id = it.next()?;
            let ctrl = it.next()?;
            let path = it.next()?;
            Some(CgroupEntry {
                controllers: ctrl
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path: path.to_string(),
            })
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
struct CgroupMount {
    /// "cgroup2" or "cgroup".
    fstype: String,
    /// Path inside the hierarchy that is mounted (the "root" field).
    root: String,
    mount_point: PathBuf,
    /// Super options; for v1 they name the controllers.
    options: Vec<String>,
}

/// cgroup mounts from /proc/self/mountinfo.
fn parse_mountinfo_cgroups(s: &str) -> Vec<CgroupMount> {
    s.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let lf: Vec<&str> = left.split_whitespace().collect();
            let rf: Vec<&str> = right.split_whitespace().collect();
            let fstype = *rf.first()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(CgroupMount {
                fstype: fstype.to_string(),
                root: unescape_mount(lf.get(3)?),
                mount_point: PathBuf::from(unescape_mount(lf.get(4)?)),
                options: rf
                    .get(2)
                    .map(|o| o.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
            })
        })
        .collect()
}

fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Directories from our cgroup up to the mount root, leaf first.
fn cgroup_dirs(mount_point: &Path, mount_root: &str, cgroup_path: &str) -> Vec<PathBuf> {
    let rel = if mount_root != "/" {
        cgroup_path.strip_prefix(mount_root).unwrap_or(cgroup_path)
    } else {
        cgroup_path
    };
    let comps: Vec<&str> = rel
        .split('/')
        .filter(|c| !c.is_empty() && *c != "." && *c != "..")
        .collect();
    (0..=comps.len())
        .rev()
        .map(|n| {
            let mut p = mount_point.to_path_buf();
            for c in &comps[..n] {
                p.push(c);
            }
            p
        })
        .collect()
}

/// A quota found along a cgroup path: the tightest in CPUs, and its raw text (the leaf's when
/// no directory sets a limit).
type Quota = (Option<f64>, Option<String>);

/// Our cgroup membership and the cgroup mounts, read once per capture.
pub(super) struct Cgroups {
    entries: Vec<CgroupEntry>,
    mounts: Vec<CgroupMount>,
}

impl Cgroups {
    pub(super) fn read() -> Cgroups {
        Cgroups {
            entries: read("/proc/self/cgroup")
                .map(|s| parse_proc_cgroup(&s))
                .unwrap_or_default(),
            mounts: read("/proc/self/mountinfo")
                .map(|s| parse_mountinfo_cgroups(&s))
                .unwrap_or_default(),
        }
    }

    /// Our path in the unified (v2) hierarchy.
    fn v2_path(&self) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.controllers.is_empty())
            .map(|e| e.path.as_str())
    }

    /// Our path in the v1 hierarchy that carries `controller`.
    fn v1_path(&self, controller: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.controllers.iter().any(|c| c == controller))
            .map(|e| e.path.as_str())
    }

    /// (mount point, mounted root) of every `fstype` mount (carrying `controller`, for v1), or
    /// the usual places with root "/" when mountinfo lists none (it can be hidden).
    fn mounts_of(
        &self,
        fstype: &str,
        controller: Option<&str>,
        usual: &[&str],
    ) -> Vec<(PathBuf, String)> {
        let m: Vec<_> = self
            .mounts
            .iter()
            .filter(|m| m.fstype == fstype)
            .filter(|m| controller.map_or(true, |c| m.options.iter().any(|o| o == c)))
            .map(|m| (m.mount_point.clone(), m.root.clone()))
            .collect();
        if m.is_empty() {
            usual
                .iter()
                .map(|p| (PathBuf::from(p), "/".to_string()))
                .collect()
        } else {
            m
        }
    }

    /// Tightest CPU quota along our cgroup path: (CPUs, raw "quota period"). v2 first; v1 when
    /// no v2 directory has a cpu.max, as on hybrid hosts that mount v2 without controllers.
    pub(super) fn cpu_quota(&self) -> Quota {
        self.cpu_quota_v2()
            .or_else(|| self.cpu_quota_v1())
            .unwrap_or((None, None))
    }

    /// cgroup v2: `cpu.max` in each directory from our cgroup up to the mount's root.
    fn cpu_quota_v2(&self) -> Option<Quota> {
        let path = self.v2_path()?;
        self.mounts_of("cgroup2", None, &["/sys/fs/cgroup"])
            .into_iter()
            .find_map(|(mp, root)| {
                tightest(cgroup_dirs(&mp, &root, path), |dir| {
                    let raw = read_trim(dir.join("cpu.max"))?;
                    let parsed = parse_cpu_max(&raw);
                    Some((raw, parsed))
                })
            })
    }

    /// cgroup v1: `cpu.cfs_quota_us` and `cpu.cfs_period_us` in the cpu controller's hierarchy.
    fn cpu_quota_v1(&self) -> Option<Quota> {
        let path = self.v1_path("cpu").unwrap_or("/");
        self.mounts_of(
            "cgroup",
            Some("cpu"),
            &["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"],
        )
        .into_iter()
        .find_map(|(mp, root)| {
            tightest(cgroup_dirs(&mp, &root, path), |dir| {
                let q = read_trim(dir.join("cpu.cfs_quota_us"))?;
                let p = read_trim(dir.join("cpu.cfs_period_us"))?;
                let parsed = parse_cfs_v1(&q, &p);
                Some((format!("{q} {p}"), parsed))
            })
        })
    }

    /// The tightest `pids.max` along our cgroup path: a number, or "max" when no directory
    /// sets one; `None` when no directory has the file (the root cgroup has none). Every
    /// thread counts as a task against it.
    pub(super) fn pids_max(&self) -> Option<String> {
        let along = |mp: &Path, root: &str, path: &str| {
            let values: Vec<String> = cgroup_dirs(mp, root, path)
                .iter()
                .filter_map(|dir| read_trim(dir.join("pids.max")))
                .collect();
            tightest_pids_max(&values)
        };
        let v2 = self.v2_path().and_then(|path| {
            self.mounts_of("cgroup2", None, &["/sys/fs/cgroup"])
                .into_iter()
                .find_map(|(mp, root)| along(&mp, &root, path))
        });
        v2.or_else(|| {
            let path = self.v1_path("pids")?;
            self.mounts_of("cgroup", Some("pids"), &["/sys/fs/cgroup/pids"])
                .into_iter()
                .find_map(|(mp, root)| along(&mp, &root, path))
        })
    }

    /// Effective cpuset of our cgroup (v2 cpuset.cpus.effective, v1 cpuset.effective_cpus).
    pub(super) fn cpuset(&self) -> Option<String> {
        let mut candidates: Vec<(PathBuf, &'static str)> = Vec::new();
        if let Some(path) = self.v2_path() {
            for m in self.mounts.iter().filter(|m| m.fstype == "cgroup2") {
                for d in cgroup_dirs(&m.mount_point, &m.root, path) {
                    candidates.push((d, "cpuset.cpus.effective"));
                }
            }
            candidates.push((
                PathBuf::from("/sys/fs/cgroup").join(path.trim_start_matches('/')),
                "cpuset.cpus.effective",
            ));
        }
        if let Some(path) = self.v1_path("cpuset") {
            for m in self
                .mounts
                .iter()
                .filter(|m| m.fstype == "cgroup" && m.options.iter().any(|o| o == "cpuset"))
            {
                for d in cgroup_dirs(&m.mount_point, &m.root, path) {
                    candidates.push((d, "cpuset.effective_cpus"));
                }
            }
        }
        candidates.push((PathBuf::from("/sys/fs/cgroup"), "cpuset.cpus.effective"));
        candidates.push((
            PathBuf::from("/sys/fs/cgroup/cpuset"),
            "cpuset.effective_cpus",
        ));
        candidates
            .into_iter()
            .find_map(|(dir, file)| read_trim(dir.join(file)))
    }
}

/// The tightest quota among `dirs` (leaf first), given how to read one directory's raw text and
/// parsed (quota, period); `None` when no directory has the files. A limit higher up binds the
/// leaf too, so the smallest wins; the first of equal ones is kept.
fn tightest(
    dirs: Vec<PathBuf>,
    read_dir: impl Fn(&Path) -> Option<(String, Option<(Option<u64>, u64)>)>,
) -> Option<Quota> {
    let mut found = false;
    let mut best: Option<(f64, String)> = None;
    let mut leaf_raw: Option<String> = None;
    for dir in dirs {
        let Some((raw, parsed)) = read_dir(&dir) else {
            continue;
        };
        found = true;
        if leaf_raw.is_none() {
            leaf_raw = Some(raw.clone());
        }
        if let Some(cpus) = parsed.and_then(quota_cpus) {
            if best.as_ref().map_or(true, |(b, _)| cpus < *b) {
                best = Some((cpus, raw));
            }
        }
    }
    if !found {
        return None;
    }
    Some(match best {
        Some((c, raw)) => (Some(c), Some(raw)),
        None => (None, leaf_raw),
    })
}

/// The tightest of the `pids.max` values read along a path ("max" or a number each): the
/// smallest number, or "max" when none is a number; `None` when nothing was read.
fn tightest_pids_max(values: &[String]) -> Option<String> {
    if values.is_empty() {
        return None;
    }
    let tightest = values.iter().filter_map(|v| v.parse::<u64>().ok()).min();
    Some(tightest.map_or_else(|| "max".to_string(), |n| n.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_v2() {
        assert_eq!(parse_cpu_max("max 100000\n"), Some((None, 100_000)));
        assert_eq!(
            parse_cpu_max("200000 100000"),
            Some((Some(200_000), 100_000))
        );
        assert_eq!(parse_cpu_max("50000 100000"), Some((Some(50_000), 100_000)));
        assert_eq!(parse_cpu_max("max"), Some((None, 100_000)));
        assert_eq!(parse_cpu_max(""), None);
        assert_eq!(parse_cpu_max("1 0"), None);
        assert_eq!(parse_cpu_max("x 100000"), None);
        assert_eq!(quota_cpus((Some(200_000), 100_000)), Some(2.0));
        assert_eq!(quota_cpus((Some(50_000), 100_000)), Some(0.5));
        assert_eq!(quota_cpus((None, 100_000)), None);
    }

    #[test]
    fn cfs_v1() {
        assert_eq!(parse_cfs_v1("-1\n", "100000\n"), Some((None, 100_000)));
        assert_eq!(
            parse_cfs_v1("150000", "100000"),
            Some((Some(150_000), 100_000))
        );
        assert_eq!(parse_cfs_v1("150000", "0"), None);
        assert_eq!(parse_cfs_v1("", "100000"), None);
        assert_eq!(
            quota_cpus(parse_cfs_v1("150000", "100000").unwrap()),
            Some(1.5)
        );
    }

    #[test]
    fn proc_cgroup_and_mountinfo() {
        let hybrid = "9:name=systemd:/\n4:memory:/process_api/22b2\n1:cpu:/\n0::/\n";
        let e = parse_proc_cgroup(hybrid);
        assert_eq!(e.len(), 4);
        assert_eq!(e[2].controllers, vec!["cpu"]);
        assert_eq!(e[3].controllers, Vec::<String>::new());
        assert_eq!(e[3].path, "/");
        let v2 = parse_proc_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n");
        assert_eq!(v2[0].path, "/user.slice/user-1000.slice/session-2.scope");
        let v1 = parse_proc_cgroup("3:cpu,cpuacct:/docker/abc\n");
        assert_eq!(v1[0].controllers, vec!["cpu", "cpuacct"]);

        let mi = "25 20 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755\n\
35 25 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:11 - cgroup cgroup rw,cpu,cpuacct\n\
40 25 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let m = parse_mountinfo_cgroups(mi);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].root, "/docker/abc");
        assert_eq!(
            m[0].mount_point,
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")
        );
        assert!(m[0].options.iter().any(|o| o == "cpu"));
        assert_eq!(m[1].fstype, "cgroup2");
    }

    #[test]
    fn cgroup_dir_walk() {
        let d = cgroup_dirs(Path::new("/sys/fs/cgroup"), "/", "/a/b");
        assert_eq!(
            d,
            vec![
                PathBuf::from("/sys/fs/cgroup/a/b"),
                PathBuf::from("/sys/fs/cgroup/a"),
                PathBuf::from("/sys/fs/cgroup"),
            ]
        );
        // Mount root is our own cgroup (container): strip it.
        let d = cgroup_dirs(
            Path::new("/sys/fs/cgroup/cpu"),
            "/docker/abc",
            "/docker/abc",
        );
        assert_eq!(d, vec![PathBuf::from("/sys/fs/cgroup/cpu")]);
        let d = cgroup_dirs(Path::new("/sys/fs/cgroup"), "/", "/../..");
        assert_eq!(d, vec![PathBuf::from("/sys/fs/cgroup")]);
    }

    #[test]
    fn tightest_quota_along_the_path() {
        let dirs = cgroup_dirs(Path::new("/cg"), "/", "/a/b");
        let files = |entries: &'static [(&'static str, &'static str)]| {
            move |dir: &Path| {
                entries
                    .iter()
                    .find(|(d, _)| Path::new(d) == dir)
                    .map(|(_, raw)| (raw.to_string(), parse_cpu_max(raw)))
            }
        };
        // The parent's 1.5 CPUs bind tighter than the leaf's 2.
        let q = tightest(
            dirs.clone(),
            files(&[
                ("/cg/a/b", "200000 100000"),
                ("/cg/a", "150000 100000"),
                ("/cg", "max 100000"),
            ]),
        );
        assert_eq!(q, Some((Some(1.5), Some("150000 100000".to_string()))));
        // No limit anywhere: the leaf's raw text, no CPUs.
        let q = tightest(dirs.clone(), files(&[("/cg/a/b", "max 100000")]));
        assert_eq!(q, Some((None, Some("max 100000".to_string()))));
        // No files at all: not found, so the caller tries the other cgroup version.
        assert_eq!(tightest(dirs, files(&[])), None);
    }

    #[test]
    fn pids_max_along_the_path() {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // A container limited to 4915 tasks under an unlimited slice.
        assert_eq!(
            tightest_pids_max(&v(&["max", "4915", "max"])).as_deref(),
            Some("4915")
        );
        assert_eq!(
            tightest_pids_max(&v(&["100", "4915"])).as_deref(),
            Some("100")
        );
        assert_eq!(tightest_pids_max(&v(&["max"])).as_deref(), Some("max"));
        assert_eq!(tightest_pids_max(&[]), None);
    }
}
