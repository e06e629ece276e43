import { randomBytes } from 'node:crypto';
import { Asset } from '#lib/http/asset';

/** What the page links: the entry script and style sheet of the console's bundle. */
export interface ConsoleEntry {
  script: string;
  style: string;
}

/** Only this origin, no inline script; CodeMirror's injected styles carry the page's nonce. */
const policy = (nonce: string) =>
  [
    "default-src 'self'",
    "script-src 'self'",
    `style-src 'self' 'nonce-${nonce}'`,
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join('; ');

function html(entry: ConsoleEntry, nonce: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csp-nonce" content="${nonce}">
<title>dbadmin</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/${entry.style}">
<script type="module" src="assets/${entry.script}"></script>
</head>
<body><div id="app"></div><noscript>The dbadmin console needs JavaScript; the API is at api/openapi.json.</noscript></body>
</html>
`;
}

/**
 * The console's page, never cached (a release is picked up at once), with a fresh nonce each time
 * for the styles CodeMirror injects.
 */
export function consolePage(entry: ConsoleEntry): Asset {
  const nonce = randomBytes(16).toString('base64');
  return new Asset(html(entry, nonce), 'text/html; charset=utf-8', 'revalidate', {
    'content-security-policy': policy(nonce),
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
  });
}
