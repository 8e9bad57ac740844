/* The C API from C: load the fixture model (tests/capi/write_fixture.cc) with
 * and without its drafter, submit sequences, check callback ordering, cancel,
 * an error path, UTF-8 completeness of pieces, identity with and without the
 * drafter and the lookup sources (prompt lookup, history) and across engines,
 * bad lookup fields refused, and the background thread.
 * Usage: test_capi FIXTURE_DIR. Exit status 0 = every check passed. */
#include <mtpspec.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                               \
      fprintf(stderr, "\n");                                      \
      ++failures;                                                 \
    }                                                             \
  } while (0)

#define MAX_SEQ 8
#define MAX_TOK 256

typedef struct {
  int n_tokens;
  int32_t tokens[MAX_TOK];
  char text[4 * MAX_TOK + 64];
  size_t text_len;
  int finished;
  char reason[16];
  int n_generated;
  int empty_pieces;   /* token events whose piece waited for the rest of a character */
  int multibyte;      /* pieces holding a complete multi-byte character (not U+FFFD) */
  int drafted;        /* tokens that came from an accepted draft */
  int looked_up;      /* ... of a lookup source (origin OTHER) */
} seq_record;

typedef struct {
  seq_record seq[MAX_SEQ + 1]; /* by id (1..MAX_SEQ) */
  int events_after_finish;
  int out_of_order;
  mtpspec_engine* engine;
  uint64_t cancel_id;        /* cancel this sequence from the callback ... */
  int cancel_at;             /* ... when its token with this index arrives */
  int lookups;               /* the engine has lookup sources */
} recorder;

/* 1 if s[0..n) is valid UTF-8 made of complete characters. */
static int utf8_complete(const char* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > n) return 0;
    for (size_t k = 1; k < len; ++k) {
      if (((unsigned char)s[i + k] & 0xC0) != 0x80) return 0;
    }
    i += len;
  }
  return 1;
}

static void on_event(void* user, const mtpspec_event* e) {
  recorder* r = (recorder*)user;
  if (e->id < 1 || e->id > MAX_SEQ) return;
  seq_record* s = &r->seq[e->id];
  if (s->finished) ++r->events_after_finish;
  CHECK(e->piece != NULL && strlen(e->piece) == e->piece_len, "piece length");
  CHECK(utf8_complete(e->piece, e->piece_len), "sequence %llu: piece of %zu bytes ends inside a "
        "character", (unsigned long long)e->id, e->piece_len);
  if (s->text_len + e->piece_len < sizeof s->text) {
    memcpy(s->text + s->text_len, e->piece, e->piece_len);
    s->text_len += e->piece_len;
  }
  if (e->kind == MTPSPEC_EVENT_TOKEN) {
    if (e->index != s->n_tokens) ++r->out_of_order;
    if (s->n_tokens < MAX_TOK) s->tokens[s->n_tokens] = e->token;
    ++s->n_tokens;
    if (e->piece_len == 0) ++s->empty_pieces;
    if (e->piece_len >= 3 && strstr(e->piece, "\xEF\xBF\xBD") != e->piece) ++s->multibyte;
    if (e->origin == MTPSPEC_ORIGIN_MTP) {
      CHECK(e->module >= 0 && e->module < 2, "module %d", e->module);
      ++s->drafted;
    } else if (e->origin == MTPSPEC_ORIGIN_OTHER) {
      CHECK(r->lookups, "origin OTHER from an engine without lookups");
      ++s->looked_up;
    } else {
      CHECK(e->origin == MTPSPEC_ORIGIN_TARGET, "origin %d", (int)e->origin);
    }
    if (r->cancel_id == e->id && e->index == r->cancel_at) {
      CHECK(mtpspec_cancel(r->engine, e->id) == MTPSPEC_OK, "cancel from the callback: %s",
            mtpspec_last_error());
    }
  } else {
    s->finished = 1;
    snprintf(s->reason, sizeof s->reason, "%s", e->finish_reason);
    s->n_generated = e->n_generated;
    CHECK(e->n_generated == s->n_tokens, "sequence %llu: FINISH says %d tokens, %d events",
          (unsigned long long)e->id, e->n_generated, s->n_tokens);
  }
}

static mtpspec_model* load(const char* dir, int with_drafter) {
  char model[1024], drafter[1024];
  snprintf(model, sizeof model, "%s/model.bin", dir);
  snprintf(drafter, sizeof drafter, "%s/drafter.safetensors", dir);
  mtpspec_model_params p = mtpspec_model_default_params();
  p.model_path = model;
  p.drafter_path = with_drafter ? drafter : NULL;
  p.threads = 1;
  mtpspec_model* m = NULL;
  mtpspec_status s = mtpspec_model_load(&p, &m);
  CHECK(s == MTPSPEC_OK && m != NULL, "load %s: %s", model, mtpspec_last_error());
  return m;
}

static mtpspec_request request(int i) {
  mtpspec_request q = mtpspec_request_default();
  static const int32_t ids[] = {1, 3, 20, 4, 30};
  q.prompt_ids = ids;
  q.n_prompt_ids = (size_t)(1 + i % 5);
  q.n_new = 40 + 7 * i;
  if (i % 2) {
    q.temperature = 1.0f;
    q.seed = (uint64_t)(10 + i);
  }
  return q;
}

/* Runs `n` requests on a fresh engine (lookups: prompt lookup and a history
 * store); returns the recorder. */
static void run(mtpspec_model* m, int n, int parallel, int background, int lookups, recorder* r) {
  memset(r, 0, sizeof *r);
  r->lookups = lookups;
  mtpspec_engine_params ep = mtpspec_engine_default_params();
  ep.parallel = parallel;
  ep.ctx = 128;
  ep.background = background;
  if (lookups) {
    ep.lookup_prompt = 1;
    ep.history_mb = 1;
    ep.lookup_max_draft = 6;
  }
  ep.callback = on_event;
  ep.user_data = r;
  mtpspec_engine* e = NULL;
  CHECK(mtpspec_engine_create(m, &ep, &e) == MTPSPEC_OK, "engine: %s", mtpspec_last_error());
  if (!e) return;
  CHECK(mtpspec_engine_kv_bytes(e) > 0, "kv bytes");
  r->engine = e;
  for (int i = 0; i < n; ++i) {
    mtpspec_request q = request(i);
    uint64_t id = 0;
    CHECK(mtpspec_submit(e, &q, &id) == MTPSPEC_OK, "submit: %s", mtpspec_last_error());
    CHECK(id == (uint64_t)(i + 1), "id %llu", (unsigned long long)id);
  }
  CHECK(mtpspec_wait(e) == MTPSPEC_OK, "wait: %s", mtpspec_last_error());
  mtpspec_engine_free(e);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
    return 2;
  }
  const char* dir = argv[1];

  /* The error path: a missing model gives MTPSPEC_ERR_IO and a message naming it. */
  {
    mtpspec_model_params p = mtpspec_model_default_params();
    p.model_path = "/nonexistent/model.bin";
    mtpspec_model* m = (mtpspec_model*)1;
    mtpspec_status s = mtpspec_model_load(&p, &m);
    CHECK(s == MTPSPEC_ERR_IO, "status %s", mtpspec_status_name(s));
    CHECK(m == NULL, "handle not cleared");
    CHECK(strstr(mtpspec_last_error(), "/nonexistent/model.bin") != NULL, "message: %s",
          mtpspec_last_error());
  }

  mtpspec_model* plain = load(dir, 0);
  mtpspec_model* spec = load(dir, 1);
  if (!plain || !spec) return 1;
  CHECK(mtpspec_model_has_drafter(spec) == 1 && mtpspec_model_has_drafter(plain) == 0, "drafter");
  CHECK(mtpspec_model_vocab(plain) == 39, "vocab %d", mtpspec_model_vocab(plain));

  /* Reference: each request alone, no drafter. */
  static recorder alone[6], together, with_drafter, bg, lookups, lookups_drafter;
  for (int i = 0; i < 6; ++i) {
    mtpspec_engine_params ep = mtpspec_engine_default_params();
    ep.parallel = 1;
    ep.ctx = 128;
    ep.callback = on_event;
    ep.user_data = &alone[i];
    memset(&alone[i], 0, sizeof alone[i]);
    mtpspec_engine* e = NULL;
    CHECK(mtpspec_engine_create(plain, &ep, &e) == MTPSPEC_OK, "%s", mtpspec_last_error());
    mtpspec_request q = request(i);
    uint64_t id = 0;
    CHECK(mtpspec_submit(e, &q, &id) == MTPSPEC_OK, "%s", mtpspec_last_error());
    int32_t busy = 1;
    while (busy) CHECK(mtpspec_step(e, &busy) == MTPSPEC_OK, "%s", mtpspec_last_error());
    mtpspec_engine_free(e);
    /* record under id 1: move to slot i + 1 for comparison */
    alone[i].seq[i + 1] = alone[i].seq[1];
  }
  run(plain, 6, 3, 0, 0, &together);
  run(spec, 6, 4, 0, 0, &with_drafter);
  run(spec, 6, 2, 1, 0, &bg);
  run(plain, 6, 2, 0, 1, &lookups);
  run(spec, 6, 3, 1, 1, &lookups_drafter);

  int empty = 0, multi = 0, drafted = 0, looked_up = 0;
  for (int i = 1; i <= 6; ++i) {
    const seq_record* a = &alone[i - 1].seq[i];
    const recorder* runs[5] = {&together, &with_drafter, &bg, &lookups, &lookups_drafter};
    CHECK(a->finished, "alone %d did not finish", i);
    for (int k = 0; k < 5; ++k) {
      const seq_record* s = &runs[k]->seq[i];
      CHECK(s->finished, "run %d sequence %d did not finish", k, i);
      CHECK(s->n_tokens == a->n_tokens && memcmp(s->tokens, a->tokens, sizeof(int32_t) *
            (size_t)(a->n_tokens < MAX_TOK ? a->n_tokens : MAX_TOK)) == 0,
            "run %d sequence %d: %d tokens, alone %d (or different ids)", k, i, s->n_tokens,
            a->n_tokens);
      CHECK(s->text_len == a->text_len && memcmp(s->text, a->text, a->text_len) == 0,
            "run %d sequence %d: text differs", k, i);
      CHECK(strcmp(s->reason, a->reason) == 0, "run %d sequence %d: %s vs %s", k, i, s->reason,
            a->reason);
      CHECK(runs[k]->out_of_order == 0 && runs[k]->events_after_finish == 0, "ordering");
      empty += s->empty_pieces;
      multi += s->multibyte;
      if (k > 0) drafted += s->drafted;
      looked_up += s->looked_up;
    }
  }
  /* The fixture's byte tokens split characters: some tokens had to wait. */
  CHECK(empty > 0 && multi > 0, "no piece waited for a character (%d) or held one (%d)", empty,
        multi);
  /* The fixture's random model falls into loops: lookup drafts are accepted
   * (measured ~190 of the lookup runs' ~400 tokens). */
  CHECK(looked_up > 20, "only %d lookup drafts accepted", looked_up);
  /* Accepted drafts are rare with a random drafter on 39 tokens (origins are
   * checked per event above, and against the counters in scheduler_test). */

  /* Bad lookup fields: refused, naming the field. */
  {
    mtpspec_engine_params ep = mtpspec_engine_default_params();
    mtpspec_engine* e = NULL;
    ep.lookup_ngram_max = 65;
    CHECK(mtpspec_engine_create(plain, &ep, &e) == MTPSPEC_ERR_INPUT && e == NULL,
          "lookup_ngram_max 65 accepted");
    CHECK(strstr(mtpspec_last_error(), "lookup_ngram_max") != NULL, "message: %s",
          mtpspec_last_error());
    ep.lookup_ngram_max = 0;
    ep.lookup_max_draft = -1;
    CHECK(mtpspec_engine_create(plain, &ep, &e) == MTPSPEC_ERR_INPUT, "lookup_max_draft -1");
    CHECK(strstr(mtpspec_last_error(), "lookup_max_draft") != NULL, "message: %s",
          mtpspec_last_error());
    ep.lookup_max_draft = 0;
    ep.history_mb = -1;
    CHECK(mtpspec_engine_create(plain, &ep, &e) == MTPSPEC_ERR_INPUT, "history_mb -1");
    CHECK(strstr(mtpspec_last_error(), "history_mb") != NULL, "message: %s",
          mtpspec_last_error());
    ep.history_mb = 0;
    CHECK(mtpspec_engine_create(plain, &ep, &e) == MTPSPEC_OK, "after refusals: %s",
          mtpspec_last_error());
    mtpspec_engine_free(e);
  }

  /* Cancel: one sequence from its own callback, one waiting; the rest run on. */
  {
    recorder r;
    memset(&r, 0, sizeof r);
    mtpspec_engine_params ep = mtpspec_engine_default_params();
    ep.parallel = 1;
    ep.ctx = 128;
    ep.callback = on_event;
    ep.user_data = &r;
    mtpspec_engine* e = NULL;
    CHECK(mtpspec_engine_create(spec, &ep, &e) == MTPSPEC_OK, "%s", mtpspec_last_error());
    mtpspec_engine* e2 = NULL;
    CHECK(mtpspec_engine_create(spec, &ep, &e2) == MTPSPEC_ERR_STATE, "second engine allowed");
    r.engine = e;
    /* The request that generates the most tokens alone (at least 4). */
    int best = 0;
    for (int i = 1; i < 6; ++i) {
      if (alone[i].seq[i + 1].n_tokens > alone[best].seq[best + 1].n_tokens) best = i;
    }
    CHECK(alone[best].seq[best + 1].n_tokens >= 4, "every request ends within 3 tokens");
    mtpspec_request q = request(best);
    uint64_t a = 0, b = 0, c = 0;
    mtpspec_submit(e, &q, &a);
    mtpspec_submit(e, &q, &b);
    mtpspec_submit(e, &q, &c);
    r.cancel_id = a;
    r.cancel_at = 2;
    CHECK(mtpspec_cancel(e, b) == MTPSPEC_OK, "cancel waiting: %s", mtpspec_last_error());
    CHECK(mtpspec_cancel(e, b) == MTPSPEC_ERR_NOT_FOUND, "cancelled twice");
    CHECK(mtpspec_cancel(e, 999) == MTPSPEC_ERR_NOT_FOUND, "unknown id");
    mtpspec_request bad = request(0);
    bad.n_new = -1;
    uint64_t x = 0;
    CHECK(mtpspec_submit(e, &bad, &x) == MTPSPEC_ERR_INPUT, "n_new -1 accepted");
    CHECK(strstr(mtpspec_last_error(), "n_new") != NULL, "message: %s", mtpspec_last_error());
    CHECK(mtpspec_wait(e) == MTPSPEC_OK, "%s", mtpspec_last_error());
    CHECK(strcmp(r.seq[a].reason, "cancelled") == 0 && r.seq[a].n_tokens == 3, "a: %s %d",
          r.seq[a].reason, r.seq[a].n_tokens);
    CHECK(strcmp(r.seq[b].reason, "cancelled") == 0 && r.seq[b].n_tokens == 0, "b: %s",
          r.seq[b].reason);
    CHECK(r.seq[c].finished && strcmp(r.seq[c].reason, "cancelled") != 0, "c: %s",
          r.seq[c].reason);
    CHECK(r.out_of_order == 0 && r.events_after_finish == 0, "ordering after cancel");
    mtpspec_engine_free(e);
  }

  mtpspec_model_free(plain);
  mtpspec_model_free(spec);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("capi: all checks passed (%d waiting pieces, %d multi-byte pieces, %d drafted, "
              "%d looked up)\n", empty, multi, drafted, looked_up);
  return failures ? 1 : 0;
}
