/*
 * The Google emulator's picker script, served at <base>/js/api.js in place of
 * https://apis.google.com/js/api.js. It implements the subset of the Google
 * Picker API (https://developers.google.com/drive/picker/reference) a picker
 * page uses — gapi.load('picker', …), google.picker.PickerBuilder, ViewId,
 * Feature, Action, Response, Document — so that the same page works against
 * real Google and against the emulator. The dialog lists the token user's
 * files from <base>/picker/v1/files (one checkbox each); "Select" asks
 * <base>/picker/v1/grant to give the app (the token's OAuth client) access to
 * the chosen files, as Google's own picker does, then calls the callback with
 * {action: 'picked', docs: [{id, name, url, mimeType, …}]}.
 */
(function () {
  'use strict';
  var current = document.currentScript;
  var base = current && current.src ? current.src.replace(/\/js\/api\.js(?:[?#].*)?$/, '') : '';

  var ViewId = {
    DOCS: 'all', DOCUMENTS: 'documents', SPREADSHEETS: 'spreadsheets', PRESENTATIONS: 'presentations',
    FORMS: 'forms', FOLDERS: 'folders', PDFS: 'pdfs', RECENTLY_PICKED: 'recently-picked'
  };
  var viewMimeTypes = {
    documents: ['application/vnd.google-apps.document'],
    spreadsheets: ['application/vnd.google-apps.spreadsheet'],
    presentations: ['application/vnd.google-apps.presentation'],
    forms: ['application/vnd.google-apps.form'],
    folders: ['application/vnd.google-apps.folder'],
    pdfs: ['application/pdf']
  };
  var Feature = {
    MULTISELECT_ENABLED: 'multiselectEnabled', NAV_HIDDEN: 'navHidden', MINE_ONLY: 'mineOnly',
    SIMPLE_UPLOAD_ENABLED: 'simpleUploadEnabled', SUPPORT_DRIVES: 'sdr'
  };
  var Action = { PICKED: 'picked', CANCEL: 'cancel', LOADED: 'loaded', ERROR: 'error' };
  var Response = { ACTION: 'action', DOCUMENTS: 'docs', PARENTS: 'parents', VIEW: 'viewToken' };
  var Document = {
    ID: 'id', NAME: 'name', URL: 'url', MIME_TYPE: 'mimeType', DESCRIPTION: 'description',
    LAST_EDITED_UTC: 'lastEditedUtc', SERVICE_ID: 'serviceId', TYPE: 'type', ICON_URL: 'iconUrl'
  };

  function View(id) { this.id_ = id || ViewId.DOCS; this.mimeTypes_ = null; }
  View.prototype.getId = function () { return this.id_; };
  View.prototype.setMimeTypes = function (m) { this.mimeTypes_ = String(m).split(','); return this; };
  View.prototype.setQuery = function () { return this; };
  function DocsView(id) { View.call(this, id); }
  DocsView.prototype = Object.create(View.prototype);
  ['setIncludeFolders', 'setSelectFolderEnabled', 'setOwnedByMe', 'setStarred', 'setParent', 'setMode',
    'setEnableDrives'].forEach(function (m) { DocsView.prototype[m] = function () { return this; }; });

  function PickerBuilder() {
    this.views_ = [];
    this.features_ = {};
    this.token_ = '';
    this.appId_ = '';
    this.developerKey_ = '';
    this.callback_ = null;
    this.title_ = '';
    this.maxItems_ = 0;
  }
  PickerBuilder.prototype.addView = function (v) {
    this.views_.push(typeof v === 'string' ? new View(v) : v);
    return this;
  };
  PickerBuilder.prototype.setOAuthToken = function (t) { this.token_ = String(t); return this; };
  PickerBuilder.prototype.setAppId = function (id) { this.appId_ = String(id); return this; };
  PickerBuilder.prototype.setDeveloperKey = function (k) { this.developerKey_ = String(k); return this; };
  PickerBuilder.prototype.setCallback = function (cb) { this.callback_ = cb; return this; };
  PickerBuilder.prototype.setTitle = function (t) { this.title_ = String(t); return this; };
  PickerBuilder.prototype.setMaxItems = function (n) { this.maxItems_ = n | 0; return this; };
  PickerBuilder.prototype.enableFeature = function (f) { this.features_[f] = true; return this; };
  PickerBuilder.prototype.disableFeature = function (f) { delete this.features_[f]; return this; };
  ['setOrigin', 'setLocale', 'setRelayUrl', 'setSize', 'hideTitleBar', 'addViewGroup', 'setSelectableMimeTypes']
    .forEach(function (m) { PickerBuilder.prototype[m] = function () { return this; }; });
  PickerBuilder.prototype.build = function () {
    if (!this.token_) { throw new Error('google.picker: setOAuthToken is required'); }
    return new Picker(this);
  };

  function Picker(b) {
    this.b_ = b;
    this.visible_ = false;
    this.root_ = null;
  }
  Picker.prototype.isVisible = function () { return this.visible_; };
  Picker.prototype.setCallback = function (cb) { this.b_.callback_ = cb; return this; };
  Picker.prototype.dispose = function () { this.setVisible(false); };
  Picker.prototype.setVisible = function (on) {
    on = !!on;
    if (on === this.visible_) { return; }
    this.visible_ = on;
    if (!on) {
      if (this.root_ && this.root_.parentNode) { this.root_.parentNode.removeChild(this.root_); }
      this.root_ = null;
      return;
    }
    this.render_();
    this.emit_({ action: Action.LOADED });
    this.load_();
  };
  Picker.prototype.emit_ = function (data) {
    var cb = this.b_.callback_;
    if (typeof cb === 'function') { cb(data); }
  };
  Picker.prototype.mimeTypes_ = function () {
    var all = null;
    this.b_.views_.forEach(function (v) {
      var m = v.mimeTypes_ || viewMimeTypes[v.getId()];
      if (!m) { all = 'any'; return; }
      if (all !== 'any') { all = (all || []).concat(m); }
    });
    return all === 'any' ? null : all;
  };
  Picker.prototype.call_ = function (method, path, body) {
    var init = { method: method, credentials: 'omit', referrerPolicy: 'no-referrer',
      headers: { 'Authorization': 'Bearer ' + this.b_.token_ } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return fetch(base + path, init).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (j) {
        if (!r.ok) {
          var msg = (j && j.error && j.error.message) || ('HTTP ' + r.status);
          throw new Error(msg);
        }
        return j;
      });
    });
  };
  function el(tag, props, children) {
    var e = document.createElement(tag);
    Object.keys(props || {}).forEach(function (k) {
      if (k === 'style') { Object.assign(e.style, props.style); } else if (k === 'text') { e.textContent = props.text; } else { e.setAttribute(k, props[k]); }
    });
    (children || []).forEach(function (c) { e.appendChild(c); });
    return e;
  }
  Picker.prototype.render_ = function () {
    var self = this;
    this.list_ = el('ul', { 'class': 'picker-files', style: { listStyle: 'none', padding: '0', margin: '0.5rem 0', maxHeight: '50vh', overflowY: 'auto' } });
    this.message_ = el('p', { 'class': 'picker-message', role: 'status', text: 'Loading your files…' });
    this.select_ = el('button', { type: 'button', 'class': 'picker-select', disabled: 'disabled', text: 'Select' });
    var cancel = el('button', { type: 'button', 'class': 'picker-cancel', text: 'Cancel', style: { marginLeft: '0.5rem' } });
    this.select_.addEventListener('click', function () { self.pick_(); });
    cancel.addEventListener('click', function () {
      self.setVisible(false);
      self.emit_({ action: Action.CANCEL });
    });
    var dialog = el('div', { role: 'dialog', 'aria-modal': 'true', 'aria-label': 'Select files', 'class': 'picker-dialog',
      style: { background: '#fff', color: '#222', borderRadius: '8px', padding: '1rem 1.25rem', minWidth: '20rem', maxWidth: '36rem', margin: '10vh auto', boxShadow: '0 4px 24px rgba(0,0,0,.3)', fontFamily: 'system-ui, sans-serif' } },
      [el('h2', { text: this.b_.title_ || 'Select files', style: { fontSize: '1.1rem', margin: '0 0 .5rem' } }), this.message_, this.list_, el('div', {}, [this.select_, cancel])]);
    this.root_ = el('div', { 'class': 'picker-overlay', style: { position: 'fixed', inset: '0', background: 'rgba(0,0,0,.4)', zIndex: '2147483000' } }, [dialog]);
    document.body.appendChild(this.root_);
  };
  Picker.prototype.load_ = function () {
    var self = this;
    var mimes = this.mimeTypes_();
    this.call_('GET', '/picker/v1/files').then(function (j) {
      if (!self.visible_) { return; }
      var files = (j.files || []).filter(function (f) { return !mimes || mimes.indexOf(f.mimeType) >= 0; });
      self.files_ = {};
      files.forEach(function (f) {
        self.files_[f.id] = f;
        var box = el('input', { type: 'checkbox', value: f.id, name: 'file', 'class': 'picker-file', 'aria-label': f.name });
        box.addEventListener('change', function () { self.changed_(box); });
        self.list_.appendChild(el('li', { style: { padding: '.25rem 0' } }, [el('label', {}, [box, document.createTextNode(' ' + f.name)])]));
      });
      self.message_.textContent = files.length ? 'Choose the files to share with this app.' : 'No files to show.';
    }).catch(function (e) {
      if (!self.visible_) { return; }
      self.message_.textContent = 'Could not list your files: ' + e.message;
    });
  };
  Picker.prototype.changed_ = function (box) {
    var boxes = this.list_.querySelectorAll('input.picker-file');
    if (box.checked && !this.b_.features_[Feature.MULTISELECT_ENABLED]) {
      Array.prototype.forEach.call(boxes, function (b) { if (b !== box) { b.checked = false; } });
    }
    var n = this.list_.querySelectorAll('input.picker-file:checked').length;
    if (this.b_.maxItems_ > 0 && n > this.b_.maxItems_) { box.checked = false; n--; }
    if (n > 0) { this.select_.removeAttribute('disabled'); } else { this.select_.setAttribute('disabled', 'disabled'); }
  };
  Picker.prototype.pick_ = function () {
    var self = this;
    var ids = Array.prototype.map.call(this.list_.querySelectorAll('input.picker-file:checked'), function (b) { return b.value; });
    if (!ids.length) { return; }
    this.select_.setAttribute('disabled', 'disabled');
    this.message_.textContent = 'Granting access…';
    this.call_('POST', '/picker/v1/grant', { fileIds: ids }).then(function () {
      var docs = ids.map(function (id) {
        var f = self.files_[id];
        var d = {};
        d[Document.ID] = f.id;
        d[Document.NAME] = f.name;
        d[Document.URL] = f.url;
        d[Document.MIME_TYPE] = f.mimeType;
        d[Document.LAST_EDITED_UTC] = Date.parse(f.modifiedTime) || 0;
        d[Document.SERVICE_ID] = 'docs';
        d[Document.TYPE] = 'document';
        return d;
      });
      var views = self.b_.views_.map(function (v) { return v.getId(); });
      self.setVisible(false);
      var data = {};
      data[Response.ACTION] = Action.PICKED;
      data[Response.DOCUMENTS] = docs;
      data[Response.VIEW] = [views[0] || ViewId.DOCS, null, {}];
      self.emit_(data);
    }).catch(function (e) {
      if (!self.visible_) { return; }
      self.message_.textContent = 'Access was not granted: ' + e.message;
      self.select_.removeAttribute('disabled');
    });
  };

  var google = window.google = window.google || {};
  google.picker = {
    PickerBuilder: PickerBuilder, View: View, DocsView: DocsView, ViewId: ViewId, Feature: Feature,
    Action: Action, Response: Response, Document: Document
  };

  var gapi = window.gapi = window.gapi || {};
  // gapi.load(libraries, callbackOrConfig): 'picker' is built in; the
  // callback runs asynchronously, as the real loader's does.
  gapi.load = function (libs, cfg) {
    var cb = typeof cfg === 'function' ? cfg : (cfg && cfg.callback);
    var onerror = cfg && typeof cfg === 'object' ? cfg.onerror : null;
    var unknown = String(libs).split(':').filter(function (l) { return l && l !== 'picker' && l !== 'client'; });
    setTimeout(function () {
      if (unknown.length) {
        if (typeof onerror === 'function') { onerror(new Error('gapi.load: unknown library ' + unknown.join(', '))); }
        return;
      }
      if (typeof cb === 'function') { cb(); }
    }, 0);
  };
})();
