#!/usr/bin/env python3
"""Build the STAND-IN NVIDIA apt repositories for triton-fleet's Molecule scenarios.

Every package here is a stand-in: it carries the real package name (as NVIDIA's CUDA repository and
libnvidia-container repository name them) but none of NVIDIA's software. Installed, they put the stand-in
nvidia-smi (printing the real H200 captures), a stand-in nvidia-ctk and stand-in systemd units in place.

Layout (flat repositories, like the real ones), signed with a throw-away key made here:
  OUT/cuda/debian12/x86_64/{*.deb,Packages,Release,InRelease}
  OUT/libnvidia-container/stable/deb/amd64/{*.deb,Packages,Release,InRelease}
  OUT/standin-archive-key.asc

usage: build_repo.py FIXTURES_DIR OUT_DIR
"""
import gzip
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DRIVER = "580.159.04"   # the version the H200 capture reports
OLDER = "580.95.05"     # an older R580 release, so that version selection is real
BRANCH = "580"
TOOLKIT = "1.17.8"

UNIT_PERSISTENCED = """[Unit]
Description=NVIDIA Persistence Daemon (stand-in, triton-fleet tests)

[Service]
Type=simple
ExecStart=/usr/bin/nvidia-persistenced --standin

[Install]
WantedBy=multi-user.target
"""
UNIT_FM = """[Unit]
Description=NVIDIA fabric manager service (stand-in, triton-fleet tests)

[Service]
Type=simple
ExecStart=/usr/bin/nv-fabricmanager --standin

[Install]
WantedBy=multi-user.target
"""
SLEEPER = "#!/bin/sh\n# STAND-IN daemon (triton-fleet tests): not NVIDIA software.\nexec sleep infinity\n"
RUNTIME = ("#!/bin/sh\n# STAND-IN nvidia-container-runtime (triton-fleet tests): no GPU here, so it is runc.\n"
           "exec runc \"$@\"\n")


def package(work, name, version, files=None, *, depends="", conflicts="", description=""):
    root = work / f"{name}_{version}"
    (root / "DEBIAN").mkdir(parents=True)
    control = [f"Package: {name}", f"Version: {version}-1", "Architecture: amd64",
               "Maintainer: triton-fleet tests <stand-in@invalid>", "Section: stand-in", "Priority: optional"]
    if depends:
        control.append(f"Depends: {depends}")
    if conflicts:
        control.append(f"Conflicts: {conflicts}")
    control.append(f"Description: STAND-IN {name} for triton-fleet tests (not NVIDIA software)\n {description or name}")
    (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
    doc = root / "usr" / "share" / "doc" / name
    doc.mkdir(parents=True)
    (doc / "README.stand-in").write_text(f"{name} {version}: a stand-in package built by {Path(__file__).name}.\n")
    for dest, (content, mode) in (files or {}).items():
        path = root / dest.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, path)
        else:
            path.write_text(content)
        path.chmod(mode)
    deb = work / f"{name}_{version}-1_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
                   check=True, stdout=subprocess.DEVNULL)
    return deb


def driver_packages(work, fixtures, version):
    smi = {"/usr/bin/nvidia-smi": (HERE / "nvidia-smi", 0o755)}
    for f in sorted(fixtures.iterdir()):
        smi[f"/usr/share/nvidia-standin/h200/{f.name}"] = (f, 0o644)
    exact = f"(= {version}-1)"
    return [
        package(work, f"nvidia-utils-{BRANCH}", version, smi, description="nvidia-smi printing the H200 capture"),
        package(work, f"nvidia-compute-utils-{BRANCH}", version,
                {"/usr/bin/nvidia-persistenced": (SLEEPER, 0o755),
                 "/lib/systemd/system/nvidia-persistenced.service": (UNIT_PERSISTENCED, 0o644)}),
        package(work, f"nvidia-driver-{BRANCH}-open", version,
                {"/usr/share/nvidia-standin/kernel-modules-open": ("open\n", 0o644)},
                depends=f"nvidia-utils-{BRANCH} {exact}, nvidia-compute-utils-{BRANCH} {exact}",
                conflicts=f"cuda-drivers-{BRANCH}", description="driver metapackage, open kernel modules"),
        package(work, f"cuda-drivers-{BRANCH}", version,
                {"/usr/share/nvidia-standin/kernel-modules-proprietary": ("proprietary\n", 0o644)},
                depends=f"nvidia-utils-{BRANCH} {exact}, nvidia-compute-utils-{BRANCH} {exact}",
                conflicts=f"nvidia-driver-{BRANCH}-open", description="driver metapackage, proprietary modules"),
        package(work, f"nvidia-fabricmanager-{BRANCH}", version,
                {"/usr/bin/nv-fabricmanager": (SLEEPER, 0o755),
                 "/lib/systemd/system/nvidia-fabricmanager.service": (UNIT_FM, 0o644)}),
    ]


def index(repo, gpg_home, key_id):
    entries = []
    for deb in sorted(repo.glob("*.deb")):
        data = deb.read_bytes()
        control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True).stdout
        entries.append(control.rstrip("\n") + f"\nFilename: ./{deb.name}\nSize: {len(data)}\n"
                       f"MD5sum: {hashlib.md5(data).hexdigest()}\nSHA256: {hashlib.sha256(data).hexdigest()}\n")
    packages = "\n".join(entries).encode()
    (repo / "Packages").write_bytes(packages)
    (repo / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    lines = ["Origin: triton-fleet stand-in", "Label: triton-fleet stand-in (not NVIDIA)", "Suite: stand-in",
             "Date: Thu, 01 Jan 2026 00:00:00 UTC", "SHA256:"]
    for name in ("Packages", "Packages.gz"):
        data = (repo / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    (repo / "Release").write_text("\n".join(lines) + "\n")
    subprocess.run(["gpg", "--homedir", str(gpg_home), "--batch", "--yes", "--local-user", key_id, "--clearsign",
                    "--output", str(repo / "InRelease"), str(repo / "Release")], check=True)


def main(fixtures, out):
    fixtures, out = Path(fixtures), Path(out)
    if out.exists():
        shutil.rmtree(out)
    cuda = out / "cuda" / "debian12" / "x86_64"
    toolkit = out / "libnvidia-container" / "stable" / "deb" / "amd64"
    cuda.mkdir(parents=True)
    toolkit.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        gpg_home = work / "gnupg"
        gpg_home.mkdir(mode=0o700)
        subprocess.run(["gpg", "--homedir", str(gpg_home), "--batch", "--passphrase", "", "--quick-gen-key",
                        "triton-fleet stand-in archive key <stand-in@invalid>", "ed25519", "sign", "1d"],
                       check=True, capture_output=True)
        key_id = "stand-in@invalid"
        for version in (OLDER, DRIVER):
            vwork = work / version
            vwork.mkdir()
            for deb in driver_packages(vwork, fixtures, version):
                shutil.copy(deb, cuda)
        tk = package(work, "nvidia-container-toolkit", TOOLKIT,
                     {"/usr/bin/nvidia-ctk": (HERE / "nvidia-ctk", 0o755),
                      "/usr/bin/nvidia-container-runtime": (RUNTIME, 0o755)},
                     description="nvidia-ctk and nvidia-container-runtime stand-ins")
        shutil.copy(tk, toolkit)
        index(cuda, gpg_home, key_id)
        index(toolkit, gpg_home, key_id)
        key = subprocess.run(["gpg", "--homedir", str(gpg_home), "--armor", "--export", key_id],
                             check=True, capture_output=True, text=True).stdout
        (out / "standin-archive-key.asc").write_text(key)
        subprocess.run(["gpgconf", "--homedir", str(gpg_home), "--kill", "gpg-agent"], check=False)
    print(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
