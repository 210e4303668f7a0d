"""Write pipelines/sample_corpus/v1 and v2 (the demo's package data): a small "Acme Cloud" handbook in md,
html, pdf, docx and txt.

Run: .venv/bin/python scripts/make_sample_corpus.py
Output is deterministic (fixed PDF/DOCX dates and ZIP timestamps), so a rerun gives identical bytes.
v2 is v1 with the edits listed in pipelines/sample_corpus/README.md, applied by the functions at the bottom.
"""

from __future__ import annotations

import copy
import datetime as dt
import html
import io
import json
import shutil
import zipfile
from pathlib import Path

import docx
from fpdf import FPDF

OUT = Path(__file__).resolve().parent.parent / "pipelines" / "sample_corpus"
FIXED_TIME = dt.datetime(2024, 1, 15, 9, 0, 0, tzinfo=dt.UTC)

# A document is a list of blocks: ("h1"|"h2"|"h3", text), ("p", text) or ("li", text); a Markdown document may
# open with ("front_matter", YAML lines).

GETTING_STARTED = [
    ("h1", "Getting Started with Acme Cloud"),
    (
        "p",
        "Acme Cloud is a managed platform for running web applications, databases and scheduled jobs. "
        "This guide walks a new team through creating an account, choosing a region and deploying a first service. "
        "Most teams finish the steps below in under an hour.",
    ),
    ("h2", "Creating an Account"),
    (
        "p",
        "Sign up at the Acme Cloud console with a work email address. The first user of an organisation becomes "
        "its owner and can invite other members from the Members page. Owners can later transfer ownership, but an "
        "organisation must always have at least one owner.",
    ),
    (
        "p",
        "Every new organisation starts on the Starter plan with a monthly credit of 50 US dollars. The credit "
        "resets on the first day of each month and does not roll over. You can upgrade to the Team or Enterprise "
        "plan at any time from the Billing page.",
    ),
    ("h2", "Choosing a Region"),
    (
        "p",
        "Acme Cloud runs in four regions: Frankfurt (eu-central), Dublin (eu-west), Virginia (us-east) and "
        "Singapore (ap-southeast). A project lives in exactly one region, and its data never leaves that region "
        "unless you configure cross-region backups. Pick the region closest to most of your users.",
    ),
    (
        "p",
        "Moving a project to another region is not automatic. You create a new project in the target region, "
        "restore a backup into it and switch your DNS records. Plan for a short maintenance window when you do this.",
    ),
    ("h2", "Deploying a First Service"),
    (
        "p",
        "A service is built from a Git repository or a container image. Connect your repository on the Sources "
        "page, select the branch to deploy and Acme Cloud builds a new release on every push. Each release gets an "
        "immutable URL, so you can test it before routing production traffic to it.",
    ),
    (
        "p",
        "Builds run in an isolated container with 4 gigabytes of memory and a 20 minute timeout. Build logs are "
        "streamed to the console and kept for 30 days, so you can compare a failing build with the last one that "
        "passed. Cached dependencies are reused between builds of the same branch.",
    ),
    (
        "p",
        "Custom domains are added on the Domains tab. Acme Cloud issues and renews TLS certificates automatically "
        "once your DNS record points at the service, which usually takes a few minutes. Wildcard domains are "
        "available on the Team and Enterprise plans.",
    ),
    ("li", "Set environment variables on the Settings tab; secrets are encrypted at rest."),
    ("li", "Health checks run every 10 seconds against the path you configure."),
    ("li", "A release that fails its health checks three times in a row is rolled back automatically."),
    ("h2", "Next Steps"),
    (
        "p",
        "Read the Billing guide to understand how usage is metered, and the Security guide before you invite "
        "your whole team. If something goes wrong, the Service Level Agreement explains what support response "
        "times you can expect on each plan.",
    ),
]

BILLING = [
    ("h1", "Billing and Plans"),
    (
        "p",
        "Acme Cloud bills each organisation monthly in arrears. Usage is metered per second for compute and per "
        "gigabyte-month for storage, and the invoice is issued on the first business day of the following month.",
    ),
    ("h2", "Plans"),
    (
        "p",
        "The Starter plan suits hobby projects and prototypes. It includes up to three services, shared CPU and "
        "community support. The Team plan adds dedicated CPU, unlimited services, role-based access control and "
        "email support with a response time of one business day.",
    ),
    (
        "p",
        "The Enterprise plan adds single sign-on, audit log export, a dedicated account manager and a 99.95 percent "
        "uptime commitment. Enterprise contracts are annual and are priced individually.",
    ),
    ("h2", "Invoices and Payment"),
    (
        "p",
        "Invoices are sent to the billing contact of the organisation and are also available on the Billing page. "
        "Payment is taken automatically from the card on file seven days after the invoice date. Enterprise "
        "customers can pay by bank transfer within 30 days.",
    ),
    (
        "p",
        "If a payment fails, Acme Cloud retries it three times over the following week and emails the billing "
        "contact after each failure. Services are suspended 14 days after the first failed attempt, and data is "
        "kept for a further 30 days before it is deleted.",
    ),
    (
        "p",
        "Invoices list usage per project and per service, and can be downloaded as PDF or CSV. Tax is added "
        "according to the billing address of the organisation. Customers in the European Union can enter a VAT "
        "number on the Billing page to have the reverse charge applied.",
    ),
    ("h2", "Refunds"),
    (
        "p",
        "Unused prepaid credit can be refunded within 30 days of purchase. Usage charges are not refundable, "
        "except when an outage breaches the Service Level Agreement; in that case a service credit is applied to "
        "the next invoice instead of a cash refund.",
    ),
    ("h2", "Spending Limits"),
    (
        "p",
        "Owners can set a monthly spending limit for each project. When a project reaches 80 percent of its limit "
        "the owners receive an email, and at 100 percent new deployments are blocked while running services keep "
        "serving traffic. Raising the limit takes effect immediately.",
    ),
]

SECURITY = [
    ("h1", "Security Guide"),
    (
        "p",
        "This guide describes how Acme Cloud protects your account and your data, and what you should configure "
        "yourself. Security is a shared responsibility: we secure the platform, and you secure your code, your "
        "credentials and the people who can reach them.",
    ),
    ("h2", "Authentication"),
    (
        "p",
        "Members sign in with a password and a second factor. Time-based one-time passwords and hardware security "
        "keys are supported; SMS codes are not, because they can be intercepted. Owners can require a second factor "
        "for every member of the organisation from the Members page.",
    ),
    (
        "p",
        "Enterprise organisations can use single sign-on through SAML 2.0 or OpenID Connect. When single sign-on "
        "is enforced, password sign-in is disabled for all members except owners, who keep a break-glass login.",
    ),
    ("h2", "API Keys"),
    (
        "p",
        "API keys authenticate scripts and CI systems. A key belongs to a project, carries a role and can be "
        "given an expiry date. Keys are shown once when they are created; Acme Cloud stores only a hash, so a lost "
        "key cannot be recovered and must be replaced.",
    ),
    (
        "p",
        "Rotate keys at least every 90 days. The console lists each key's last use, which makes it easy to find "
        "keys that are no longer needed and revoke them.",
    ),
    ("h2", "Encryption"),
    (
        "p",
        "All data is encrypted at rest with AES-256, using keys held in a hardware security module in the same "
        "region as the data. Traffic between clients and Acme Cloud uses TLS 1.2 or newer, and traffic between "
        "our own services is encrypted with mutual TLS.",
    ),
    ("h2", "Audit Logs"),
    (
        "p",
        "Every change to members, keys, billing settings and deployments is written to the audit log with the "
        "actor, the time and the source IP address. Audit logs are kept for one year on the Team plan and for "
        "seven years on the Enterprise plan, where they can also be exported to your own storage.",
    ),
]

BACKUPS = [
    ("h1", "Backups and Restores"),
    (
        "p",
        "Acme Cloud backs up every managed database and every persistent volume automatically. Backups are "
        "stored in a separate availability zone of the same region, so the loss of one data centre does not "
        "affect them. This document explains the schedule, how long backups are kept and how to restore one.",
    ),
    ("h2", "Backup Schedule"),
    (
        "p",
        "A full snapshot is taken every night between 01:00 and 04:00 in the region's local time. Databases also "
        "stream their write-ahead log continuously, which allows point-in-time recovery to any second within the "
        "retention period. Snapshots of volumes are crash-consistent, not application-consistent.",
    ),
    (
        "p",
        "You can take a manual snapshot at any time from the console or the API. Manual snapshots are kept until "
        "you delete them and are billed as ordinary storage.",
    ),
    ("page", ""),
    ("h2", "Retention"),
    (
        "p",
        "Nightly snapshots are kept for 30 days on the Starter and Team plans. On the Enterprise plan retention "
        "can be extended to one year, and snapshots can be copied to a second region for disaster recovery.",
    ),
    (
        "p",
        "When a project is deleted, its backups are kept for seven more days so that an accidental deletion can "
        "be undone. After that they are destroyed and cannot be recovered by Acme Cloud support.",
    ),
    ("page", ""),
    ("h2", "Restoring a Backup"),
    (
        "p",
        "Restores always create a new database or volume; they never overwrite the original. Choose a snapshot "
        "or a point in time, give the new resource a name, and attach it to your service once you have checked "
        "the data. A restore of a 100 gigabyte database usually completes in about twenty minutes.",
    ),
    (
        "p",
        "Test your restores regularly. A backup that has never been restored is a hope, not a plan, and the "
        "quarterly restore drill is the simplest way to find missing permissions or outdated runbooks.",
    ),
]

INCIDENT_RESPONSE = [
    ("h1", "Incident Response"),
    (
        "p",
        "This document describes how the Acme Cloud operations team handles incidents that affect customers. It "
        "covers how incidents are classified, who is paged, how we communicate and how we learn from them.",
    ),
    ("h2", "Severity Levels"),
    (
        "p",
        "A severity 1 incident is a full outage of a region or data loss for any customer. A severity 2 incident "
        "is a partial outage or a serious degradation, such as deployments failing for a subset of projects. A "
        "severity 3 incident affects a single feature and has a workaround.",
    ),
    (
        "p",
        "The first responder assigns the severity and may raise or lower it as more is learned. When in doubt, "
        "choose the higher severity; downgrading later costs nothing.",
    ),
    ("h2", "On-Call Rotation"),
    (
        "p",
        "Each platform team runs a weekly on-call rotation with a primary and a secondary engineer. The primary "
        "must acknowledge a page within five minutes; if they do not, the secondary is paged, and after another ten "
        "minutes the engineering manager is paged as well.",
    ),
    ("li", "Hand over the pager on Monday at 10:00 local time, with a short written summary."),
    ("li", "Never go on call for more than two consecutive weeks."),
    ("h2", "Communication"),
    (
        "p",
        "For severity 1 and 2 incidents the incident commander posts a first update on the status page within 15 "
        "minutes and then at least every 30 minutes until the incident is resolved. Updates say what is affected, "
        "what we are doing and when the next update will come.",
    ),
    ("h2", "Postmortems"),
    (
        "p",
        "Every severity 1 and 2 incident gets a written postmortem within five business days. Postmortems are "
        "blameless: they describe what happened and which safeguards failed, not who made a mistake. Each "
        "postmortem ends with action items that have an owner and a due date.",
    ),
]

SLA = [
    ("h1", "SERVICE LEVEL AGREEMENT"),
    (
        "p",
        "Acme Cloud commits to a monthly uptime of 99.9 percent for services on the Team plan and 99.95 percent "
        "on the Enterprise plan. Uptime is measured by external probes every minute from three locations. The "
        "Starter plan carries no uptime commitment.",
    ),
    ("h2", "SERVICE CREDITS"),
    (
        "p",
        "If monthly uptime falls below the commitment, the customer receives a service credit of 10 percent of "
        "that month's charges for the affected services. Below 99 percent the credit is 25 percent. Credits must "
        "be requested within 30 days of the end of the month.",
    ),
    ("h2", "SUPPORT RESPONSE TIMES"),
    (
        "p",
        "Team plan customers receive a first response to support tickets within one business day. Enterprise "
        "customers receive a first response within one hour for urgent tickets, around the clock. Response times "
        "apply to the first reply, not to the resolution.",
    ),
    ("h2", "EXCLUSIONS"),
    (
        "p",
        "The commitment does not cover scheduled maintenance announced at least 48 hours in advance, outages "
        "caused by the customer's own code or configuration, or features labelled as beta in the console.",
    ),
]

DB_FAILOVER_RUNBOOK = [
    ("h1", "Runbook: Database Failover"),
    (
        "p",
        "This runbook is for Acme Cloud operations engineers only. It describes how to fail over a managed "
        "database cluster when its primary node is unhealthy. Customers must never be sent this document.",
    ),
    ("h2", "When to Fail Over"),
    (
        "p",
        "Fail over when the primary has been unreachable for more than two minutes and the automatic failover "
        "has not started, or when replication lag on the primary's host exceeds 60 seconds and keeps growing. Do "
        "not fail over during a running restore; wait for it to finish first.",
    ),
    ("h2", "Procedure"),
    (
        "p",
        "Open the cluster in the operations console and confirm which replica has the lowest lag. Promote it with "
        "the Promote action, then watch the connection count on the new primary for five minutes. The old primary "
        "is fenced automatically and rebuilt as a replica.",
    ),
    (
        "p",
        "A known console bug shows a raw `<script>alert(1)</script>` string in the cluster notes field when a note "
        "was pasted from a browser. It is harmless text, but do not copy notes from that field into customer "
        "tickets; retype them instead.",
    ),
    ("h2", "After the Failover"),
    (
        "p",
        "Post in the incident channel with the cluster name, the time of promotion and the measured data loss, "
        "which should be zero for synchronous replicas. Open a ticket for the storage team if the old primary "
        "does not rejoin as a replica within thirty minutes.",
    ),
]

RATE_LIMITS = [
    ("h1", "API Rate Limits"),
    (
        "p",
        "The Acme Cloud API limits how many requests each API key can make, to protect the platform from runaway "
        "scripts. Limits are applied per key and per minute, and they are the same in every region.",
    ),
    ("h2", "Default Limits"),
    (
        "p",
        "Read requests are limited to 600 per minute and write requests to 120 per minute. Deployment requests "
        "have a separate limit of 10 per minute per project, because each one starts a build.",
    ),
    ("h2", "When You Hit a Limit"),
    (
        "p",
        "A request over the limit receives HTTP status 429 with a Retry-After header that says how many seconds "
        "to wait. Clients should back off exponentially and must not retry immediately. Enterprise customers can "
        "ask their account manager for higher limits.",
    ),
]

WEBHOOKS = [
    ("h1", "Webhooks"),
    (
        "p",
        "Webhooks let your systems react to events in Acme Cloud without polling the API. When an event happens, "
        "Acme Cloud sends an HTTP POST request with a JSON body to every endpoint subscribed to that event.",
    ),
    ("h2", "Events"),
    (
        "p",
        "You can subscribe to deployment events, backup events, billing events and membership events. Each "
        "delivery carries the event type, the project, the time of the event and a unique delivery ID that you "
        "can use to discard duplicates.",
    ),
    ("h2", "Verifying Signatures"),
    (
        "p",
        "Every request carries an Acme-Signature header: an HMAC-SHA256 of the raw body, keyed with the "
        "endpoint's signing secret. Compute the same HMAC on your side and compare the two in constant time "
        "before trusting the payload. Reject requests whose timestamp is more than five minutes old.",
    ),
    ("h2", "Retries"),
    (
        "p",
        "A delivery succeeds when your endpoint answers with a 2xx status within ten seconds. Failed deliveries "
        "are retried with exponential backoff for up to 24 hours, after which the event is dropped and shown as "
        "failed on the Webhooks page.",
    ),
]

# The source model (issue 31): two sources that disagree, where the official API docs outrank a community
# article (a conflict the ranking decides); two pages of equal standing that disagree (an open conflict); and a
# page for staff only (a customer's answer citing it is out_of_scope). Unchanged from v1 to v2.
API_QUOTAS = [
    ("front_matter", "authority: official_spec\nsource_type: api_docs\nversion: v2\ndate: 2026-01-10"),
    ("h1", "API Quotas"),
    (
        "p",
        "Each API key may make 100 deployment status requests per minute. The quota is shared by every project "
        "the key can reach, and it resets at the start of each minute.",
    ),
]
COMMUNITY_QUOTA_TIPS = [
    ("front_matter", "authority: community\nsource_type: blog\ndate: 2025-06-01"),
    ("h1", "Tips: Staying Under the API Quota"),
    (
        "p",
        "A write-up from the Acme Cloud community forum. Each API key may make 60 deployment status requests "
        "per minute. Batch your polling so that a busy dashboard stays under it.",
    ),
]
SUPPORT_CHANNELS = [
    ("h1", "Support Channels"),
    (
        "p",
        "Phone support is available on the Team plan during business hours. Email support answers within one "
        "business day on every paid plan.",
    ),
]
SUPPORT_FAQ = [
    ("h1", "Support FAQ"),
    (
        "p",
        "Phone support is not available on the Team plan during business hours. Team customers reach support "
        "by email or through the console.",
    ),
]
DISCOUNT_POLICY = [
    ("front_matter", "access_groups: [staff]\nauthority: certified_internal"),
    ("h1", "Discount Policy"),
    (
        "p",
        "Discounts above 20 percent on Enterprise contracts need the approval of the finance lead before the "
        "quote is sent.",
    ),
]

# name -> (blocks, sidecar or None). The file extension picks the renderer.
V1 = {
    "getting-started.md": (GETTING_STARTED, None),
    "billing.md": (BILLING, None),
    "security.html": (SECURITY, None),
    "backups.pdf": (BACKUPS, None),
    "incident-response.docx": (INCIDENT_RESPONSE, None),
    "sla.txt": (SLA, None),
    "internal/db-failover-runbook.md": (DB_FAILOVER_RUNBOOK, {"access_scope": "internal_only"}),
    "api/rate-limits.md": (RATE_LIMITS, None),
    "api/quotas.md": (API_QUOTAS, None),
    "community/quota-tips.md": (COMMUNITY_QUOTA_TIPS, None),
    "support/channels.md": (SUPPORT_CHANNELS, None),
    "support/faq.md": (SUPPORT_FAQ, None),
    "staff/discount-policy.md": (DISCOUNT_POLICY, None),
}


# ------------------------------------------------------------------ v1 -> v2 edits (listed in README.md)


def make_v2(v1: dict) -> dict:
    v2 = copy.deepcopy(v1)
    getting_started = v2["getting-started.md"][0]
    getting_started.insert(
        2,
        (
            "p",
            "New in 2024: every organisation can now create projects in the Toronto "
            "(ca-central) region. Existing projects are not moved automatically.",
        ),
    )
    _edit(
        getting_started,
        "Acme Cloud runs in four regions: Frankfurt (eu-central), Dublin (eu-west), Virginia (us-east) and "
        "Singapore (ap-southeast).",
        "Acme Cloud runs in five regions: Frankfurt (eu-central), Dublin (eu-west), Virginia (us-east), "
        "Toronto (ca-central) and Singapore (ap-southeast).",
    )
    billing = v2["billing.md"][0]
    _edit(
        billing,
        "Unused prepaid credit can be refunded within 30 days of purchase.",
        "Unused prepaid credit can be refunded within 14 days of purchase.",
    )
    _edit(
        billing,
        "Services are suspended 14 days after the first failed attempt",
        "Services are suspended 21 days after the first failed attempt",
    )
    _move_section(v2["security.html"][0], "Audit Logs", before="Encryption")
    _edit(
        v2["backups.pdf"][0],
        "Nightly snapshots are kept for 30 days on the Starter and Team plans.",
        "Nightly snapshots are kept for 35 days on the Starter and Team plans.",
    )
    _edit(
        v2["incident-response.docx"][0],
        "The primary must acknowledge a page within five minutes;",
        "The primary must acknowledge a page within three minutes;",
    )
    _edit(
        v2["internal/db-failover-runbook.md"][0],
        "unreachable for more than two minutes",
        "unreachable for more than ninety seconds",
    )
    del v2["api/rate-limits.md"]
    v2["webhooks.html"] = (WEBHOOKS, None)
    return v2


def _edit(blocks: list, old: str, new: str) -> None:
    hits = [i for i, (_, text) in enumerate(blocks) if old in text]
    assert len(hits) == 1, f"edit target must occur once: {old!r}"
    kind, text = blocks[hits[0]]
    blocks[hits[0]] = (kind, text.replace(old, new))


def _move_section(blocks: list, heading: str, before: str) -> None:
    """Move the h2 section titled `heading` (up to the next h1/h2) to just before the h2 titled `before`."""
    start = blocks.index(("h2", heading))
    end = next((i for i in range(start + 1, len(blocks)) if blocks[i][0] in ("h1", "h2")), len(blocks))
    section = blocks[start:end]
    del blocks[start:end]
    target = blocks.index(("h2", before))
    blocks[target:target] = section


# ------------------------------------------------------------------ renderers


def render_md(blocks: list) -> bytes:
    prefixes = {"h1": "# ", "h2": "## ", "h3": "### ", "p": "", "li": "- "}
    lines = []
    for kind, text in blocks:
        if kind == "page":
            continue
        if kind == "front_matter":
            lines += ["---", text, "---"]
            continue
        # consecutive list items form one list
        if lines and not (kind == "li" and lines[-1].startswith("- ")):
            lines.append("")
        lines.append(prefixes[kind] + text)
    return ("\n".join(lines) + "\n").encode("utf-8")


def render_txt(blocks: list) -> bytes:
    parts = [("* " if kind == "li" else "") + text for kind, text in blocks if kind not in ("page", "front_matter")]
    return ("\n\n".join(parts) + "\n").encode("utf-8")


def render_html(blocks: list) -> bytes:
    title = html.escape(blocks[0][1])
    body = []
    in_list = False
    for kind, text in blocks:
        if kind == "page":
            continue
        if in_list and kind != "li":
            body.append("</ul>")
            in_list = False
        if kind == "li" and not in_list:
            body.append("<ul>")
            in_list = True
        body.append(f"<{kind}>{html.escape(text, quote=False)}</{kind}>")
    if in_list:
        body.append("</ul>")
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"
    )
    return page.encode("utf-8")


def render_pdf(blocks: list) -> bytes:
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_TIME)
    pdf.set_producer("citekeeper sample corpus")
    pdf.set_title(blocks[0][1])
    # A generous top margin: unstructured classifies text at the very top of a page as a page Header.
    pdf.set_margins(left=20, top=30, right=20)
    pdf.set_auto_page_break(auto=True, margin=25)
    pdf.add_page()
    fonts = {"h1": ("B", 18, 9), "h2": ("B", 14, 7), "h3": ("B", 12, 6), "p": ("", 11, 5), "li": ("", 11, 5)}
    for kind, text in blocks:
        if kind == "page":
            pdf.add_page()
            continue
        style, size, line_height = fonts[kind]
        pdf.set_font("Helvetica", style, size)
        pdf.multi_cell(0, line_height, ("- " if kind == "li" else "") + text, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(5)
    return bytes(pdf.output())


def render_docx(blocks: list) -> bytes:
    document = docx.Document()
    properties = document.core_properties
    properties.author = "Acme Cloud Operations"
    properties.title = blocks[0][1]
    properties.created = properties.modified = FIXED_TIME.replace(tzinfo=None)
    properties.last_modified_by = "Acme Cloud Operations"
    properties.revision = 1
    levels = {"h1": 1, "h2": 2, "h3": 3}
    for kind, text in blocks:
        if kind in levels:
            document.add_heading(text, levels[kind])
        elif kind == "li":
            document.add_paragraph(text, style="List Bullet")
        elif kind == "p":
            document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return _with_fixed_zip_times(buffer.getvalue())


def _with_fixed_zip_times(archive: bytes) -> bytes:
    """python-docx stamps ZIP entries with the current time; rewrite them with a fixed one."""
    source = zipfile.ZipFile(io.BytesIO(archive))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=FIXED_TIME.timetuple()[:6])
            fixed.compress_type = zipfile.ZIP_DEFLATED
            target.writestr(fixed, source.read(info.filename))
    return out.getvalue()


RENDERERS = {".md": render_md, ".txt": render_txt, ".html": render_html, ".pdf": render_pdf, ".docx": render_docx}


def write_version(directory: Path, documents: dict) -> None:
    if directory.exists():
        shutil.rmtree(directory)
    for name, (blocks, sidecar) in sorted(documents.items()):
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(RENDERERS[path.suffix](blocks))
        if sidecar:
            sidecar_path = path.with_name(path.name + ".citekeeper.json")
            sidecar_path.write_text(json.dumps(sidecar, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def write_corpus(out: Path) -> None:
    write_version(out / "v1", V1)
    write_version(out / "v2", make_v2(V1))


def main() -> None:
    write_corpus(OUT)
    print(f"wrote {OUT / 'v1'} and {OUT / 'v2'}")


if __name__ == "__main__":
    main()
