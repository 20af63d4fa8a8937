//! The report in headless Chromium, offline (skipped with the reason when none is installed).

use super::*;

/// A Chromium to test with: $THREADLAB_CHROMIUM, or the usual names on PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("THREADLAB_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Runs the browser on `url` with `args`, no network: a new network namespace when the
/// kernel lets us make one, and always a proxy and resolver that lead nowhere.
fn browse(browser: &Path, url: &str, args: &[&str]) -> (String, String) {
    let profile = scratch(&format!("profile-{}", args.len()));
    let isolated = Command::new("unshare")
        .args(["-n", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let mut cmd = if isolated {
        let mut c = Command::new("unshare");
        c.arg("-n").arg(browser);
        c
    } else {
        Command::new(browser)
    };
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
        "--proxy-server=127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .arg(url)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the browser starts");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the browser did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&profile);
    println!(
        "browser run with {}",
        if isolated {
            "no network namespace access (unshare -n) and a dead proxy"
        } else {
            "a dead proxy and resolver (unshare -n not permitted here)"
        }
    );
    (out_thread.join().unwrap(), err_thread.join().unwrap())
}

/// Console messages of the page under test. The browser's own pages (its new-tab page and
/// omnibox, `chrome://...`) log to the same console in some versions, e.g. "Slow network is
/// detected ... chrome://resources/roboto/roboto-regular.woff2" when the network is cut off as
/// it is here; those say nothing about the report and are left out.
fn console_lines(log: &str) -> Vec<&str> {
    const BROWSER_OWN: [&str; 3] = [
        "source: chrome://",
        "source: chrome-untrusted://",
        "source: devtools://",
    ];
    log.lines()
        .filter(|l| l.contains(":CONSOLE"))
        .filter(|l| !BROWSER_OWN.iter().any(|own| l.contains(own)))
        .collect()
}

#[test]
fn the_report_renders_in_headless_chromium_offline() {
    let Some(browser) = chromium() else {
        if std::env::var_os("THREADLAB_REQUIRE_BROWSER").is_some() {
            panic!("THREADLAB_REQUIRE_BROWSER is set but no Chromium was found");
        }
        println!(
            "skipped: no Chromium found (set THREADLAB_CHROMIUM, or apt-get install chromium) \
             to render the report in a real browser"
        );
        return;
    };
    let json = tiny();
    let page = json.with_extension("html");
    let url = format!("file://{}", page.display());
    let (dom, log) = browse(&browser, &url, &["--dump-dom"]);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the page did not finish loading: {log}"
    );
    assert!(
        !dom.contains(" data-errors=\""),
        "errors in the page: {}",
        {
            dom.split("data-errors=\"")
                .nth(1)
                .unwrap_or("")
                .chars()
                .take(400)
                .collect::<String>()
        }
    );
    assert_eq!(console_lines(&log), Vec::<&str>::new(), "console output");
    // The DOM as the browser built it: every experiment, its section, its charts.
    assert_every_experiment_has_a_section_and_a_chart(&dom, &results(json));

    // The check can fail: a page that reaches for the network is caught, by the page's own
    // error hook and by the console.
    let dir = scratch("browser");
    let bad = dir.join("bad.html");
    std::fs::write(
        &bad,
        html::page(
            "bad",
            "<p>x</p><img src=\"https://example.com/x.png\" alt=\"\">",
        ),
    )
    .unwrap();
    let (dom_bad, log_bad) = browse(
        &browser,
        &format!("file://{}", bad.display()),
        &["--dump-dom"],
    );
    assert!(
        dom_bad.contains(" data-errors=\""),
        "a blocked load went unnoticed: {dom_bad}"
    );
    assert!(!console_lines(&log_bad).is_empty());

    // A picture for people to look at.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("threadlab-report.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        &browser,
        &url,
        &[
            "--window-size=1280,3200",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    println!("screenshot: {}", shot.display());
    std::fs::remove_dir_all(&dir).unwrap();
}
