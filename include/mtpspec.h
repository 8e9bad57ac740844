/* mtpspec: speculative decoding with a model's own MTP drafter, continuous
 * batching, output identical to plain decoding — the public C API.
 *
 * Objects (opaque handles):
 *   mtpspec_model   a loaded target model, its tokenizer, optionally a drafter,
 *                   and a thread pool. Immutable once loaded.
 *   mtpspec_engine  a continuous-batching scheduler over one model: `parallel`
 *                   sequences decode at once, each with up to `ctx` positions;
 *                   more wait (FIFO) for a free slot.
 *
 * Flow: mtpspec_model_load -> mtpspec_engine_create -> mtpspec_submit (any
 * number) -> mtpspec_step until idle (foreground), or mtpspec_wait
 * (background thread) -> mtpspec_engine_free -> mtpspec_model_free.
 *
 * Tokens: the callback gets one MTPSPEC_EVENT_TOKEN per generated token, in
 * order per sequence (index 0, 1, ...), then one MTPSPEC_EVENT_FINISH. Each
 * event carries the text that became final with it: complete UTF-8 only (a
 * piece that would end inside a character waits for the rest, so it may be
 * empty), held back while it could be the start of a stop string; the
 * concatenation of a sequence's pieces is its text. Each token carries its
 * origin: the target's own choice, or a draft the target accepted, with the
 * drafter module that proposed it.
 *
 * Identity: with temperature 0 or seeded (coupled) sampling, a sequence's
 * tokens do not depend on what else runs in the engine, on `parallel`, or on
 * whether it speculates: they equal plain decoding's for the same request.
 *
 * Errors: every function that can fail returns an mtpspec_status; on failure
 * mtpspec_last_error() gives the message (this thread's last failure). No C++
 * exception crosses this API.
 *
 * Thread safety:
 *   - mtpspec_last_error and mtpspec_status_name: any thread (the message is
 *     per thread).
 *   - A model may be used by one engine at a time (engine_create fails with
 *     MTPSPEC_ERR_STATE while another engine of the model exists); free the
 *     model only after its engine.
 *   - Foreground engine (background = 0): every call on it from one thread at
 *     a time; the callback runs inside mtpspec_step, on the caller's thread,
 *     and may call mtpspec_submit and mtpspec_cancel.
 *   - Background engine (background = 1): mtpspec_submit and mtpspec_cancel
 *     from any threads, concurrently (each waits at most one step);
 *     mtpspec_wait from any thread. The callback runs on the engine's own
 *     thread, one event at a time, with no lock held; it may call
 *     mtpspec_submit and mtpspec_cancel but not mtpspec_wait or
 *     mtpspec_engine_free. mtpspec_step is refused (MTPSPEC_ERR_STATE).
 *   - mtpspec_engine_free: once, when no other call on the engine runs; it
 *     cancels what is still running (their FINISH events are delivered first).
 *   - Event pointers (piece, finish_reason) are valid only during the callback.
 */
#ifndef MTPSPEC_H
#define MTPSPEC_H

#include <stddef.h>
#include <stdint.h>

#if defined(MTPSPEC_BUILDING_LIBRARY)
#define MTPSPEC_API __attribute__((visibility("default")))
#else
#define MTPSPEC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define MTPSPEC_VERSION_MAJOR 0
#define MTPSPEC_VERSION_MINOR 1

typedef enum mtpspec_status {
  MTPSPEC_OK = 0,
  MTPSPEC_ERR_IO = 1,         /* a file is missing, unreadable or truncated */
  MTPSPEC_ERR_FORMAT = 2,     /* a file is not what it claims to be */
  MTPSPEC_ERR_CONFIG = 3,     /* a model or drafter configuration is unsupported */
  MTPSPEC_ERR_INPUT = 4,      /* a bad argument: parameters, prompt, limits */
  MTPSPEC_ERR_NOT_FOUND = 5,  /* mtpspec_cancel: no such running or waiting sequence */
  MTPSPEC_ERR_STATE = 6,      /* not allowed now (see the thread-safety rules) */
  MTPSPEC_ERR_INTERNAL = 7    /* a bug: please report the message */
} mtpspec_status;

typedef struct mtpspec_model mtpspec_model;
typedef struct mtpspec_engine mtpspec_engine;

typedef struct mtpspec_model_params {
  const char* model_path;      /* a llama2.c .bin or a Hugging Face folder */
  const char* tokenizer_path;  /* NULL: the one found beside the model */
  const char* drafter_path;    /* NULL: no drafter (no speculation) */
  int32_t threads;             /* 0: the physical cores; at most 8x the logical CPUs */
} mtpspec_model_params;

typedef enum mtpspec_event_kind {
  MTPSPEC_EVENT_TOKEN = 0,
  MTPSPEC_EVENT_FINISH = 1
} mtpspec_event_kind;

typedef enum mtpspec_origin {
  MTPSPEC_ORIGIN_TARGET = 0,  /* the target's own choice (correction or bonus) */
  MTPSPEC_ORIGIN_MTP = 1,     /* an accepted draft of MTP module `module` */
  MTPSPEC_ORIGIN_OTHER = 2    /* an accepted draft of another source */
} mtpspec_origin;

typedef struct mtpspec_event {
  mtpspec_event_kind kind;
  uint64_t id;            /* the sequence (mtpspec_submit's id) */
  int32_t token;          /* TOKEN: the token id; FINISH: -1 */
  int32_t index;          /* TOKEN: its index among the generated tokens */
  const char* piece;      /* text that became final with this event (see above) */
  size_t piece_len;       /* bytes of piece (it is also NUL-terminated) */
  mtpspec_origin origin;  /* TOKEN */
  int32_t module;         /* TOKEN with origin MTP: the module k that drafted it */
  const char* source;     /* TOKEN: "target", or the draft source's name ("mtp", "prompt", ...) */
  const char* finish_reason;  /* FINISH: "eos", "length", "stop", "context" or "cancelled" */
  int32_t n_prompt;       /* FINISH: prompt tokens */
  int32_t n_generated;    /* FINISH: generated tokens */
} mtpspec_event;

typedef void (*mtpspec_callback)(void* user_data, const mtpspec_event* event);

typedef struct mtpspec_engine_params {
  int32_t parallel;           /* sequences decoded at once (>= 1) */
  int32_t ctx;                /* positions per sequence (0: min(model maximum, 2048)) */
  int32_t background;         /* 1: run on an own thread (see the rules above) */
  mtpspec_callback callback;  /* may be NULL (events are dropped) */
  void* user_data;
  /* Draft sources beside the drafter (free to propose: no forward), used by
   * requests with speculate = 1, also on a model without a drafter; accepted
   * drafts of theirs come with origin MTPSPEC_ORIGIN_OTHER. The scheduler
   * verifies a proposal only where its live acceptance pays for the rows. */
  int32_t lookup_prompt;      /* 1: each sequence's own text (prompt lookup) */
  double history_mb;          /* > 0: a store of the engine's finished sequences,
                                 bounded to this many MiB (oldest evicted); 0: none */
  int32_t lookup_ngram_max;   /* longest suffix matched, 1..64 (0: 4) */
  int32_t lookup_max_draft;   /* longest lookup draft, 1..256 (0: 8) */
  /* The draft sources by name, comma separated ("mtp,prompt", a source
   * registered with mtpspec_register_draft_source); NULL: the drafter (if
   * loaded) and the lookups the fields above turn on. */
  const char* draft_sources;
  /* Draft trees from the drafter: "W1,W2,..." (widths per depth) or "auto";
   * NULL: chains. */
  const char* tree;
} mtpspec_engine_params;

/* A draft source of your own: proposes up to max_len tokens continuing the
 * sequence committed[0..n_committed) of slot `slot` into out; returns how
 * many (0: none). Called on the engine's thread, for every speculating
 * sequence every step (it must be cheap: no model runs); what it proposes
 * never changes the output (the target verifies every token). */
typedef int32_t (*mtpspec_propose_fn)(void* user_data, uint64_t slot, const int32_t* committed,
                                      size_t n_committed, int32_t max_len, int32_t* out);

typedef struct mtpspec_request {
  const char* prompt;          /* UTF-8 text, or NULL to use prompt_ids */
  const int32_t* prompt_ids;   /* used when prompt is NULL */
  size_t n_prompt_ids;
  int32_t add_special;         /* text prompts: add BOS/EOS as the tokenizer does */
  int32_t n_new;               /* new tokens at most (>= 0) */
  float temperature;           /* 0: greedy */
  int32_t top_k;               /* 0: off */
  float top_p;                 /* 1: off (0 is read as 1) */
  float min_p;                 /* 0: off */
  uint64_t seed;
  int32_t speculate;           /* 1: draft with the model's drafter (if loaded) */
  int32_t draft_k;             /* longest draft (0: the drafter's K) */
  const char* const* stop;     /* stop strings (may be NULL) */
  size_t n_stop;
} mtpspec_request;

/* Defaults: everything 0 / NULL, top_p 1, add_special 1, speculate 1, n_new 128. */
MTPSPEC_API mtpspec_model_params mtpspec_model_default_params(void);
MTPSPEC_API mtpspec_engine_params mtpspec_engine_default_params(void);
MTPSPEC_API mtpspec_request mtpspec_request_default(void);

MTPSPEC_API const char* mtpspec_version(void);
/* Registers a draft source under `name` (letters, digits, '-', '_'; at most
 * 32) for engines created afterwards (name it in draft_sources). max_len: its
 * longest proposal, 1..64. Names are process-wide and cannot be reused. */
MTPSPEC_API mtpspec_status mtpspec_register_draft_source(const char* name,
                                                         mtpspec_propose_fn propose,
                                                         void* user_data, int32_t max_len);
MTPSPEC_API const char* mtpspec_status_name(mtpspec_status s);
/* This thread's last error message ("" if none). Valid until its next failing call. */
MTPSPEC_API const char* mtpspec_last_error(void);

MTPSPEC_API mtpspec_status mtpspec_model_load(const mtpspec_model_params* params,
                                              mtpspec_model** out);
MTPSPEC_API void mtpspec_model_free(mtpspec_model* model);
/* Vocabulary size, and whether a drafter was loaded. */
MTPSPEC_API int32_t mtpspec_model_vocab(const mtpspec_model* model);
MTPSPEC_API int32_t mtpspec_model_has_drafter(const mtpspec_model* model);

MTPSPEC_API mtpspec_status mtpspec_engine_create(mtpspec_model* model,
                                                 const mtpspec_engine_params* params,
                                                 mtpspec_engine** out);
MTPSPEC_API void mtpspec_engine_free(mtpspec_engine* engine);
/* Total memory held for the sequences' KV caches, in bytes. */
MTPSPEC_API size_t mtpspec_engine_kv_bytes(const mtpspec_engine* engine);

/* Queues a sequence; *id receives its id (> 0). */
MTPSPEC_API mtpspec_status mtpspec_submit(mtpspec_engine* engine, const mtpspec_request* request,
                                          uint64_t* id);
/* Ends a waiting or running sequence ("cancelled"); its slot is free at once. */
MTPSPEC_API mtpspec_status mtpspec_cancel(mtpspec_engine* engine, uint64_t id);
/* Foreground: one step (at most one forward of the target) and its events.
 * *busy (may be NULL) is set to 0 once nothing is waiting or running. */
MTPSPEC_API mtpspec_status mtpspec_step(mtpspec_engine* engine, int32_t* busy);
/* Until every submitted sequence has finished: steps (foreground) or waits
 * for the engine's thread (background). */
MTPSPEC_API mtpspec_status mtpspec_wait(mtpspec_engine* engine);

#ifdef __cplusplus
}
#endif

#endif /* MTPSPEC_H */
