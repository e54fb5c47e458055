/*
 * signature.h - how the collector groups slow stacks the way people think
 * about them. A hang's key is the part of its stack the MAJORITY of its
 * samples share: from the root down, as long as more than half of the
 * hang's complete samples pass through the same frame. Stray samples (a
 * clock read, a signal landing in another call) and stacks cut short
 * (their outermost frame is `<truncated: ...>`) neither move nor create a
 * key. Repeated hangs whose keys differ only in how deep the majority
 * reached (one occurrence spent 55 % in a helper, the next 45 %) land in
 * one group by perf__group_pick (docs/internals/collector.md,
 * "Grouping hangs"). A CPU sample's signature is its whole
 * stack. Pure functions over frame labels, no recursion; any thread.
 */
#ifndef PERF_COLLECTOR_SIGNATURE_H
#define PERF_COLLECTOR_SIGNATURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One symbolized stack: frame names, innermost first ("fn" or, unnamed,
   "module+0xaddr"). */
typedef struct perf__named_stack_s {
  const char *const *frames;
  size_t depth;
} perf__named_stack_t;

/* A hang's sampled stacks with their sample counts. */
typedef struct perf__hang_samples_s {
  const perf__named_stack_t *stacks;
  const uint64_t *samples; /* per stack */
  size_t n;
} perf__hang_samples_t;

/* The outermost frame of a stack the walk cut short ("<truncated: no
   rule>"; the collector's own depth cut is "<truncated>"). */
#define PERF__TRUNCATED_PREFIX "<truncated"

/* A frame's name as shown: its function, else "<module basename>+<address>"
   (address as "0x..." text); module NULL is "??". Truncated to fit out. */
void perf__frame_label(char *out, size_t size, const char *function, const char *module,
                       const char *address);

/* A frame's name in a signature or a hang key: perf__frame_label's, with
   a mangled C++/Rust name demangled and compiler clone suffixes (".isra.0",
   " [clone .constprop.0]") dropped, so a clone never splits a function
   into two groups. */
void perf__group_label(char *out, size_t size, const char *function, const char *module,
                       const char *address);

/* The label of a stack cut short, added as its outermost frame (so it has
   a signature of its own): "<truncated: reason>". */
void perf__truncated_label(char *out, size_t size, const char *reason);

/* Whether a stack counts for a hang's key: it is complete (its outermost
   frame is no PERF__TRUNCATED_PREFIX label). When none of a hang's
   stacks is complete all of them count (the key is then a best effort). */
bool perf__stack_complete(const perf__named_stack_t *s);

/* The hang key of h: the longest root path that more than half of the
   counted samples share, written innermost first into out[0..*len)
   (pointers into h's stacks); 0 frames when there is no majority root.
   At most max frames (the innermost part is cut, which keeps the key's
   root). O(depth x stacks), no recursion. */
void perf__hang_key(const perf__hang_samples_t *h, const char **out, size_t max, size_t *len);

/* The counted samples of h at the end of a root path (key innermost
   first, len frames): self, the samples whose stack ends there, and per
   next frame down. names[]/samples[] get one entry per distinct next
   frame (pointers into h's stacks), at most cap (h->n is always enough);
   returns the number of entries. *through (may be NULL): all samples
   passing through the path. */
size_t perf__hang_children(const perf__hang_samples_t *h, const char *const *key, size_t len,
                           const char **names, uint64_t *samples, size_t cap, uint64_t *self,
                           uint64_t *through);

/* The counted samples of h through each root part of key (innermost
   first, len frames): through[d] passed through the key's first d + 1
   frames, d = 0..len-1. */
void perf__hang_through(const perf__hang_samples_t *h, const char *const *key, size_t len,
                        uint64_t *through);

/* An existing hang group: its key (innermost first), the samples its
   hangs had at the key's end (self and per next frame), and through each
   root part of the key (perf__hang_through, summed over its hangs; NULL:
   none recorded). */
typedef struct perf__group_view_s {
  const char *const *key;
  size_t len;
  const char *const *child_names;
  const uint64_t *child_samples;
  size_t n_children;
  uint64_t self;
  const uint64_t *through; /* len entries, or NULL */
} perf__group_view_t;

/* The share (>= 1/PERF__GROUP_CHILD_SHARE) of the samples at the point
   where two keys part that must have gone the other key's way, the
   group's and the hang's counted together, for them to be the same hang
   (see perf__group_pick); a hang's own share of 1/PERF__GROUP_LOOK_SHARE
   into a frame is enough to look for groups there (perf__hang_turns), so
   a hang with few samples still finds its group. */
#define PERF__GROUP_CHILD_SHARE 4
#define PERF__GROUP_LOOK_SHARE 8

/* Which existing group a hang with key (innermost first, len frames)
   joins: the index into groups, or -1 for a new group of its own key.
   Two keys that share p >= 1 root frames and then part are the same hang
   when they "cross": at that point at least a quarter of the samples
   there, the group's hangs' and this hang's counted together, went the
   other one's way (the group's samples into the hang's next frame, or
   away from the group's own next frame; the hang's into the group's next
   frame, or away from its own). The same hang repeated splits around the
   same ratio, so its two ways both carry close to their share; a
   different hang seldom goes the other's way. The rule, deterministic for
   a given set of groups:
   1. a group with exactly the key;
   2. else the deepest crossing group whose key is a proper prefix of the
      hang's (the same hang, its majority tipped one frame deeper);
   3. else a group whose key leaves the hang's key after p shared root
      frames (it goes on where the hang's key ends, or turns into a
      sibling: the same hang, its majority shallower this time, or tipped
      into the sibling leaf) and that crosses, or into whose next frame a
      quarter of this hang's own samples there went (a group whose long
      history never went the hang's way must not outvote that); the
      largest p first, then the shortest key, the more of this hang's
      samples its way, the lower index. */
long perf__group_pick(const perf__hang_samples_t *h, const char *const *key, size_t len,
                      const perf__group_view_t *groups, size_t n);

/* Rule 3's test of perf__group_pick for one group: a group whose key
   leaves the hang's key (innermost first, len frames) after p shared root
   frames (1 <= p <= len) into g_next, g_at of its samples through those p
   frames and g_into of them on into g_next (its hang_group_path), crosses
   the hang there. *h_into: the hang's samples there into g_next. */
bool perf__group_crosses(const perf__hang_samples_t *h, const char *const *key, size_t len,
                         size_t p, const char *g_next, uint64_t g_at, uint64_t g_into,
                         uint64_t *h_into);

/* Where a hang's samples turned away from its key with at least
   1/PERF__GROUP_LOOK_SHARE of the samples there: after the key's first
   `depth` root frames, into `child` (not the key's own next frame). The
   groups rule 3 of perf__group_pick can take are under these. */
typedef struct perf__hang_turn_s {
  size_t depth;
  const char *child; /* into h's stacks */
} perf__hang_turn_t;

/* The turns of h off key (innermost first, len frames), root first, at
   most cap; how many. O(depth x stacks), no recursion. */
size_t perf__hang_turns(const perf__hang_samples_t *h, const char *const *key, size_t len,
                        perf__hang_turn_t *out, size_t cap);

/* How many root frames of a group's key (len frames; through: its hangs'
   samples through the key's first 1, 2, ... frames) more than half of
   the samples through its root frame pass: the part of the key the
   majority of the whole group shares, shown for it. len when through[0]
   is 0. */
size_t perf__group_majority_len(const uint64_t *through, size_t len);

/* Build the key frame by frame: h = perf__signature_add(h, frame) from
   PERF__SIGNATURE_START, innermost first; the same as perf__signature_hash. */
#define PERF__SIGNATURE_START 1469598103934665603ULL
uint64_t perf__signature_add(uint64_t h, const char *frame);

/* A stable 64-bit key of a frame list (FNV-1a over the names, with a
   separator so ["ab","c"] and ["a","bc"] differ); printed as 16 hex digits
   it is the `signature` of the API. */
uint64_t perf__signature_hash(const char *const *frames, size_t depth);

#endif
