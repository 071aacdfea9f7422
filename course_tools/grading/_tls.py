"""Mutual TLS for the grading cluster: ``python -m course_tools grading-tls DIR``.

Over ``tcp://`` a Dask scheduler authenticates no one: whoever reaches its port (any user of the
machine, anyone on its network) runs code on every worker, reads the grading secret there and
rewrites reports. Over ``tls://`` with a certificate authority of the instructor's, the
scheduler and the workers accept only peers holding a certificate that authority signed, and the
client must hold one too (Dask checks both sides: ``ssl.CERT_REQUIRED``).

:func:`make_certificates` writes one folder per role, each with the authority's certificate
(``ca.pem``), the role's certificate (``cert.pem``) and its private key (``key.pem``, mode 0600)::

    DIR/scheduler/   for `dask scheduler --protocol tls --tls-ca-file ... --tls-cert ... --tls-key ...`
    DIR/worker/      for `dask worker tls://HOST:8786 --tls-ca-file ... --tls-cert ... --tls-key ...`
    DIR/client/      for `python -m course_tools grade ... --scheduler tls://HOST:8786 --tls DIR/client`

The authority's own key is never written: no other certificate can be signed with it later
(run the command again for a new set, which replaces the old one everywhere). Copy each folder
only to the machine of its role. Any holder of one of these keys can run code on the workers:
they are as secret as the grading secret.

:func:`check_scheduler` is the client's door: ``tls://`` with a certificate folder, or ``tcp://``
only with ``insecure_plain_tcp`` (``--insecure-plain-tcp-anyone-can-run-code``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
from pathlib import Path

ROLES = ("scheduler", "worker", "client")
FILES = ("ca.pem", "cert.pem", "key.pem")
INSECURE_FLAG = "--insecure-plain-tcp-anyone-can-run-code"
DAYS = 365


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "lectures_lib grading"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, key, issuer: str, signer, *, authority: bool, days: int):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=authority, path_length=None),
                              critical=True))
    if authority:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    else:  # every role both listens and connects (workers talk to each other)
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.chmod(path, mode)


def make_certificates(folder: Path, *, days: int = DAYS) -> dict[str, Path]:
    """A new authority and one certificate per role under ``folder`` (see the module doc);
    returns {role: its folder}. Replaces an earlier set in ``folder``."""
    from cryptography.hazmat.primitives import serialization

    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise ValueError(f"days must be an int >= 1, got {days!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    ca_key = _key()
    ca = _certificate("lectures_lib grading CA", ca_key, "lectures_lib grading CA", ca_key,
                      authority=True, days=days)
    pem = serialization.Encoding.PEM
    made = {}
    for role in ROLES:
        key = _key()
        cert = _certificate(f"lectures_lib grading {role}", key, "lectures_lib grading CA",
                            ca_key, authority=False, days=days)
        target = folder / role
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(mode=0o700)
        _write(target / "ca.pem", ca.public_bytes(pem), 0o644)
        _write(target / "cert.pem", cert.public_bytes(pem), 0o644)
        _write(target / "key.pem", key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()), 0o600)
        made[role] = target
    return made  # the authority's key is dropped here: nothing else can be signed with it


def security(folder: Path):
    """Dask's :class:`distributed.Security` for the role whose folder ``folder`` is."""
    from distributed.security import Security

    folder = Path(folder)
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"tls must be a folder written by `python -m course_tools grading-tls` "
                         f"(ca.pem, cert.pem, key.pem), got {folder} without {', '.join(missing)}")
    return Security(tls_ca_file=str(folder / "ca.pem"), tls_client_cert=str(folder / "cert.pem"),
                    tls_client_key=str(folder / "key.pem"), require_encryption=True)


def dask_options(folder: Path) -> list[str]:
    """``dask scheduler`` / ``dask worker`` options for the role folder ``folder``."""
    folder = Path(folder)
    return ["--tls-ca-file", str(folder / "ca.pem"), "--tls-cert", str(folder / "cert.pem"),
            "--tls-key", str(folder / "key.pem")]


def check_scheduler(scheduler: object, tls: object, insecure_plain_tcp: bool):
    """The :class:`~distributed.Security` to reach ``scheduler`` with (None: plain tcp, allowed
    only by ``insecure_plain_tcp``); ValueError naming what is wrong otherwise."""
    if not isinstance(scheduler, str) or "://" not in scheduler:
        raise ValueError(f"scheduler must be a Dask scheduler's address like tls://HOST:8786, "
                         f"got {scheduler!r}")
    protocol = scheduler.split("://", 1)[0]
    if protocol == "tls":
        if tls is None:
            raise ValueError(f"scheduler {scheduler} is tls://: give the client's certificate "
                             "folder with --tls DIR/client (`python -m course_tools grading-tls "
                             "DIR` writes it)")
        return security(Path(tls))
    if protocol == "tcp" and insecure_plain_tcp:
        if tls is not None:
            raise ValueError(f"tls={tls} is given but scheduler {scheduler} is tcp://: use "
                             "tls://HOST:PORT")
        return None
    raise ValueError(
        f"scheduler must be tls://HOST:PORT with --tls DIR/client (mutual TLS: `python -m "
        f"lectures_lib grading-tls DIR` makes the certificates), got {scheduler!r}. Over tcp:// "
        "the scheduler authenticates no one: anyone who reaches its port runs code on the "
        f"workers, reads the grading secret and rewrites grades ({INSECURE_FLAG} allows it on "
        "a network only you can reach)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools grading-tls",
        description="Make the certificate authority and the certificates of a grading "
                    "cluster (mutual TLS: scheduler, workers, client).")
    parser.add_argument("folder", type=Path, help="where to write scheduler/, worker/, client/")
    parser.add_argument("--days", type=int, default=DAYS,
                        help=f"how long the certificates hold (default {DAYS})")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        made = make_certificates(args.folder, days=args.days)
    except ValueError as error:
        parser.error(str(error))
    scheduler, worker, client = (" ".join(dask_options(made[role])) for role in ROLES)
    print(f"wrote {', '.join(str(p) for p in made.values())} (keys 0600; copy each folder only to "
          "its role's machine)\n"
          f"  dask scheduler --protocol tls --host HOST --no-dashboard {scheduler}\n"
          f"  dask worker tls://HOST:8786 {worker}\n"
          f"  python -m course_tools grade SUBMISSIONS --scheduler tls://HOST:8786 "
          f"--tls {made['client']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
