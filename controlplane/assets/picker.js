// The file picker page (controlplane/picker_page.go): nothing happens
// until the user clicks "Choose files". The click claims the single-use
// link (a same-origin POST carrying the page's anti-CSRF value, which the
// server compares with its SameSite=Strict cookie) and receives the user's
// access token; only then does the provider's picker open. The files the
// user picks are reported to the platform (audited), retried while the
// platform cannot record them. Every text shown is set with textContent.

const root = document.getElementById('picker');
const status = document.getElementById('status');
const choose = document.getElementById('choose');
const retry = document.getElementById('retry');

// csrfHeader carries the page's anti-CSRF value (pickerCSRFHeader).
const csrfHeader = 'X-Auditrail-Picker-CSRF';
// reportDelays are the waits before the automatic retries of a report.
const reportDelays = [500, 1500, 3000];

function show(msg, ok) {
  status.textContent = msg;
  status.className = ok === true ? 'ok' : ok === false ? 'err' : '';
}

// post sends a JSON body to a route of the platform and answers its status
// and decoded envelope (null when the answer has none).
async function post(url, body) {
  const resp = await fetch(url, {
    method: 'POST', credentials: 'same-origin', cache: 'no-store', referrerPolicy: 'no-referrer',
    headers: { 'Content-Type': 'application/json', [csrfHeader]: root.dataset.csrf },
    body: JSON.stringify(body),
  });
  let envelope = null;
  try { envelope = await resp.json(); } catch { /* 204, or not JSON */ }
  return { status: resp.status, ok: resp.ok, envelope };
}

function messageOf(r, fallback) {
  return (r.envelope && typeof r.envelope.msg === 'string' && r.envelope.msg) || fallback;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// report records the picked files; a platform that cannot record them now
// (5xx, network) is asked again, then the user may retry.
async function report(files) {
  retry.hidden = true;
  const granted = 'Access granted to ' + files.length + ' file(s). Return to your assistant and retry.';
  for (let attempt = 0; ; attempt++) {
    let r = null;
    try { r = await post(root.dataset.report, { files }); } catch { /* network: retry */ }
    if (r && (r.ok || r.status === 409)) { // 409: an earlier attempt was recorded
      show(granted, true);
      return;
    }
    if (r && r.status < 500) {
      show(messageOf(r, 'The platform refused the report of your choice.'), false);
      return;
    }
    if (attempt >= reportDelays.length) {
      show('Access was granted to ' + files.length + ' file(s), but the platform could not record it yet. Try again.', false);
      retry.onclick = () => { show('Recording your choice…'); report(files); };
      retry.hidden = false;
      return;
    }
    await sleep(reportDelays[attempt]);
  }
}

function pickerLoaded() {
  return new Promise((resolve, reject) => {
    if (typeof gapi === 'undefined') { reject(new Error('no picker script')); return; }
    gapi.load('picker', { callback: resolve, onerror: reject });
  });
}

function openPicker(cfg) {
  const picker = google.picker;
  const picked = (data) => {
    const action = data[picker.Response.ACTION];
    if (action === picker.Action.PICKED) {
      const files = (data[picker.Response.DOCUMENTS] || []).map((d) => ({
        id: String(d[picker.Document.ID] || ''),
        name: String(d[picker.Document.NAME] || ''),
        mime_type: String(d[picker.Document.MIME_TYPE] || ''),
      }));
      show('Recording your choice…');
      report(files);
    } else if (action === picker.Action.CANCEL) {
      show('No file was chosen. Ask your assistant for a new link to try again.', false);
    }
  };
  let b = new picker.PickerBuilder()
    .addView(picker.ViewId.DOCUMENTS)
    .enableFeature(picker.Feature.MULTISELECT_ENABLED)
    .setOAuthToken(cfg.token)
    .setAppId(cfg.app_id)
    .setCallback(picked);
  if (cfg.developer_key) { b = b.setDeveloperKey(cfg.developer_key); }
  b.build().setVisible(true);
}

async function claim() {
  choose.disabled = true;
  show('Opening the file picker…');
  let r;
  try {
    r = await post(root.dataset.claim, {});
  } catch {
    show('The platform cannot be reached. Reload this page to try again.', false);
    choose.disabled = false;
    return;
  }
  if (!r.ok || !r.envelope || !r.envelope.data) {
    show(messageOf(r, 'The file picker cannot be opened.'), false);
    // A refused claim (used, expired, foreign) stays refused; a platform
    // that is briefly unavailable may answer the next click.
    choose.disabled = r.status < 500;
    return;
  }
  try {
    await pickerLoaded();
  } catch {
    show('The file picker could not be loaded. Ask your assistant for a new link.', false);
    return;
  }
  show('Choose the files in the picker.');
  openPicker(r.envelope.data);
}

choose.addEventListener('click', claim);
