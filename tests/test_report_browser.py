"""The HTML report in a real browser: headless Chromium (Debian's `chromium` and
`chromium-driver`, installed by scripts/ensure-browser.sh) driven by Selenium.

Nothing downloads a browser or a driver: both paths are given explicitly, which
makes Selenium skip Selenium Manager, and Selenium Manager is additionally
patched to fail if anything reaches it. The test is skipped, saying why, only
where the browser is not installed (scripts/ensure-browser.sh could not install
it: no root, no apt-get, no network).

It saves a screenshot of a report of the sample clusters under the test's
tmp_path (a picture that is not blank); the picture docs/report.md shows is
taken by scripts/report-screenshot.sh of what `simdb report` writes.
"""

from __future__ import annotations

import itertools
import random
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from simdb.report import ReportCluster, ReportItem, render_report

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "sample"

EVIL = (
    "An injected post: <script>window.__pwned = 1</script> and "
    '<img src="x" onerror="window.__pwned = 2"> and </script><script>window.__pwned = 3</script> end.'
)

from selenium import webdriver  # noqa: E402  (a [test] dependency)

if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
    pytest.skip(
        f"no browser: {CHROMIUM} / {CHROMEDRIVER} missing; run scripts/ensure-browser.sh "
        "(apt-get install chromium chromium-driver, needs root and the Debian mirror)",
        allow_module_level=True,
    )

from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1500",
]


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.common import selenium_manager

    def no_downloads(*args, **kwargs):  # pragma: no cover - must never run
        raise AssertionError("Selenium Manager was called: nothing may download a browser or driver")

    original = selenium_manager.SeleniumManager.binary_paths
    selenium_manager.SeleniumManager.binary_paths = no_downloads
    profile = tempfile.mkdtemp(prefix="simdb-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        selenium_manager.SeleniumManager.binary_paths = original
        shutil.rmtree(profile, ignore_errors=True)


def open_report(driver, path: Path, timeout: float = 30) -> float:
    """Load the report from a file:// URL; return seconds until its first page is rendered."""
    t = time.perf_counter()
    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.documentElement.getAttribute('data-ready')") == "1"
    )
    return time.perf_counter() - t


def status_count(driver) -> int:
    return int(driver.find_element(By.ID, "status").get_attribute("data-count"))


def type_filter(driver, text: str, expect) -> None:
    box = driver.find_element(By.ID, "filter")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)  # typed, like a user (clear() fires no input event)
    if text:
        box.send_keys(text)
    try:
        WebDriverWait(driver, 10).until(
            lambda d: d.find_element(By.ID, "status").get_attribute("data-query") == text.strip().lower()
            and expect(status_count(d))
        )
    except TimeoutException:
        pytest.fail(f"filter {text!r}: the list did not change as expected (count {status_count(driver)})")


# --------------------------------------------------------------------------- data


def sample_clusters(k: int = 3) -> tuple[list[ReportCluster], int]:
    """Clusters of the sample corpus (fingerprints and union-find in Python),
    with exact Jaccard from the shingle sets, plus one injected-markup cluster."""
    from simdb import Fingerprinter, hamming
    from simdb.core.sketch.shingles import shingles

    files = sorted(SAMPLE.rglob("*.txt"))
    assert len(files) >= 20, "the sample corpus is missing"
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in files}
    fper = Fingerprinter()
    fps = {key: fper.fingerprint(t) for key, t in texts.items()}
    parent = {key: key for key in texts}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in itertools.combinations(sorted(texts), 2):
        if hamming(fps[a], fps[b]) <= k:
            ra, rb = find(a), find(b)
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = {}
    for key in sorted(texts):
        groups.setdefault(find(key), []).append(key)
    clusters = []
    for rep, keys in groups.items():
        if len(keys) < 2:
            continue
        rs = set(shingles(texts[rep]))
        members = []
        for key in keys[1:]:
            ms = set(shingles(texts[key]))
            members.append(
                ReportItem(key, texts[key], hamming(fps[rep], fps[key]), jaccard=len(rs & ms) / len(rs | ms))
            )
        clusters.append(ReportCluster(ReportItem(rep, texts[rep]), members))
    clusters.append(
        ReportCluster(
            ReportItem("zz/injected-post.html", EVIL),
            [ReportItem("zz/injected-post-copy.html", EVIL.replace("end.", "the end."), 1)],
        )
    )
    return clusters, len(texts) + 2


def big_clusters(n: int = 10_000, seed: int = 7) -> list[ReportCluster]:
    rnd = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)]
    out = []
    for i in range(n):
        length = 2000 if i % 500 == 0 else rnd.choice([30, 60, 120])
        base = rnd.choices(vocab, k=length)
        members = []
        for j in range(rnd.choice([1, 1, 1, 2, 3, 6])):
            w = list(base)
            for _ in range(3):
                w[rnd.randrange(len(w))] = f"edit{j}"
            members.append(ReportItem(f"doc-{i:05d}-v{j}", " ".join(w), rnd.randint(0, 3)))
        out.append(ReportCluster(ReportItem(f"doc-{i:05d}", " ".join(base)), members))
    out.append(
        ReportCluster(ReportItem("needle-rep", "a unique zebrafish sentence"), [ReportItem("needle", "a unique zebrafish line", 2)])
    )
    return out


# --------------------------------------------------------------------------- tests


def test_sample_report_clusters_diffs_filter_and_inert_script(browser, tmp_path):
    clusters, total = sample_clusters()
    page = render_report(
        clusters,
        title="simdb near-duplicate report: fables",
        collection="fables",
        k=3,
        total_texts=total,
        generated_at="2026-11-22 18:00 UTC",
    )
    path = tmp_path / "fables-report.html"
    path.write_text(page, encoding="utf-8")
    open_report(browser, path)

    # every cluster is listed (one page), the largest first
    sections = browser.find_elements(By.CSS_SELECTOR, "section.cluster")
    assert len(sections) == len(clusters) == status_count(browser)
    badges = [int(s.find_element(By.CSS_SELECTOR, ".badge").text.split()[0]) for s in sections]
    assert badges == sorted(badges, reverse=True) and badges[0] >= 3
    assert "04-the-lion-and-the-mouse.txt" in sections[0].find_element(By.CSS_SELECTOR, ".key.rep").text

    # the marked differences: the typo variant of "The Lion and the Mouse" ("rope" -> "ropse")
    deleted = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "del.chg")]
    inserted = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "ins.chg")]
    assert "ropes" in deleted and "ropse" in inserted, (deleted, inserted)
    # the re-wrapped copy: only its straightened quotes are marked, not the moved line breaks
    pairs = browser.find_elements(By.CSS_SELECTOR, ".pair")
    rewrapped = [p for p in pairs if "lion-and-mouse.reformatted" in p.find_element(By.CSS_SELECTOR, ".pairhead").text]
    assert rewrapped
    marks = {e.text for e in rewrapped[0].find_elements(By.CSS_SELECTOR, "del.chg, ins.chg")}
    assert marks == {"\u201c", "\u201d", '"'}, marks
    assert "distance" in pairs[0].text and "Jaccard" in pairs[0].text
    # one similarity a member: the rule's Jaccard where known, else the Hamming one (1 - d/64), so named
    heads = [p.find_element(By.CSS_SELECTOR, ".pairhead").text for p in pairs]
    assert all(("Jaccard" in h) != ("Hamming similarity" in h) for h in heads), heads
    assert "chains of near-duplicate pairs" in browser.find_element(By.ID, "chains").text
    # an exact copy is flagged, not diffed
    copy = [p for p in pairs if "ants-and-grasshopper.copy" in p.text]
    assert copy and "identical text" in copy[0].text and not copy[0].find_elements(By.CSS_SELECTOR, ".cols")

    # the summary with its plots
    for plot in ("plot-sizes", "plot-distances", "plot-unique"):
        assert browser.find_element(By.ID, plot).is_displayed()

    # injected markup stayed text: nothing ran, and the characters are visible
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "<script>window.__pwned = 1</script>" in body
    assert '<img src="x" onerror="window.__pwned = 2">' in body
    assert not browser.find_elements(By.CSS_SELECTOR, "main img, main script")

    # no errors, no blocked request, no Content-Security-Policy violation
    errors = [e for e in browser.get_log("browser") if e.get("level") in ("SEVERE", "WARNING")]
    assert not errors, errors

    screenshot = tmp_path / "report-screenshot.png"
    browser.set_window_size(1280, 1500)
    browser.execute_script("window.scrollTo(0, 0)")
    assert browser.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 10_000

    # the filter narrows the list, then widens it again
    type_filter(browser, "pwned", lambda n: n == 1)
    shown = browser.find_elements(By.CSS_SELECTOR, "section.cluster")
    assert len(shown) == 1 and "injected-post" in shown[0].text
    assert "<script>window.__pwned = 1</script>" in shown[0].text
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    type_filter(browser, "lion mouse", lambda n: n == 1)
    type_filter(browser, "no such words anywhere", lambda n: n == 0)
    assert "No cluster matches" in browser.find_element(By.ID, "clusters").text
    type_filter(browser, "", lambda n: n == len(clusters))


def test_ten_thousand_clusters_open_page_filter_and_expand(browser, tmp_path):
    clusters = big_clusters()
    path = tmp_path / "big-report.html"
    path.write_text(render_report(clusters, k=3, total_texts=60_000), encoding="utf-8")
    seconds = open_report(browser, path, timeout=60)
    # informational only: a time limit here would be a flaky wall-clock assertion on a shared machine
    print(f"\n10,001 clusters ({path.stat().st_size / 1e6:.1f} MB): first page rendered in {seconds:.2f} s")
    assert status_count(browser) == 10_001
    assert len(browser.find_elements(By.CSS_SELECTOR, "section.cluster")) == 50
    assert browser.find_element(By.ID, "status").text.startswith("Clusters 1–50 of 10,001")

    # paging
    browser.find_element(By.ID, "next").click()
    assert browser.find_element(By.ID, "status").text.startswith("Clusters 51–100 ")
    first = browser.find_element(By.CSS_SELECTOR, "section.cluster .num").text
    assert first == "#51"
    browser.find_element(By.ID, "prev").click()
    assert browser.find_element(By.CSS_SELECTOR, "section.cluster .num").text == "#1"
    browser.execute_script(
        "var s = document.getElementById('pagesize'); s.value = '500'; s.dispatchEvent(new Event('change'));"
    )
    assert len(browser.find_elements(By.CSS_SELECTOR, "section.cluster")) == 500

    # a long text is cut with a control to expand it (cluster 1 is a 7-text cluster)
    t = time.perf_counter()
    type_filter(browser, "doc-00000", lambda n: n == 1)
    print(f"filtering 10,001 clusters: {time.perf_counter() - t:.2f} s")
    pair = browser.find_element(By.CSS_SELECTOR, "section.cluster .pair")
    short = len(pair.find_element(By.CSS_SELECTOR, ".cols .col:last-child .text").text)
    assert pair.find_elements(By.CSS_SELECTOR, ".gap"), "elided stretches are marked"
    pair.find_element(By.CSS_SELECTOR, "button.expand").click()
    full = len(pair.find_element(By.CSS_SELECTOR, ".cols .col:last-child .text").text)
    assert full > short and full > 10_000
    assert not pair.find_elements(By.CSS_SELECTOR, ".gap")
    # every change stays visible in the compact view too
    pair.find_element(By.CSS_SELECTOR, "button.expand").click()
    assert len(pair.find_elements(By.CSS_SELECTOR, "ins.chg")) >= 1

    type_filter(browser, "zebrafish", lambda n: n == 1)
    assert "needle" in browser.find_element(By.CSS_SELECTOR, "section.cluster").text
    browser.find_element(By.ID, "filter").send_keys(Keys.CONTROL, "a", Keys.DELETE)
    WebDriverWait(browser, 10).until(lambda d: status_count(d) == 10_001)
