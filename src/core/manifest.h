/* manifest.h - multi-document YAML (or JSON) manifests as jansson values,
 * with the source line of every node kept aside so that validation errors
 * can say `platform.yaml:14: spec.hard: "8Gx" is not a quantity`. */
#ifndef TENANTD_MANIFEST_H
#define TENANTD_MANIFEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "tenantd/status.h"

typedef struct td_manifest td_manifest;

/* Largest manifest accepted, in bytes. */
#define TD_MANIFEST_MAX (16u << 20)

/* Aliases (*name) are expanded by copying what their anchor (&name) made,
 * merge keys (<<: *base) included, within a budget like Kubernetes' YAML
 * decoder's ("document contains excessive aliasing"): the JSON values
 * that aliases add may be at most TD_MANIFEST_ALIAS_RATIO times those the
 * text makes itself (counted so far, over the whole stream), or
 * TD_MANIFEST_ALIAS_MIN if that is more; and the bytes of strings and
 * keys they add at most TD_MANIFEST_ALIAS_RATIO times the text's length,
 * or TD_MANIFEST_ALIAS_MIN_BYTES. A text of n bytes thus makes at most
 * about 4 * n/2 values (a value takes at least 2 bytes: "1,") holding 4 * n
 * bytes of strings, and an alias bomb stops after TD_MANIFEST_ALIAS_MIN
 * copies (or 1 MiB of copied strings). */
#define TD_MANIFEST_ALIAS_RATIO     3u
#define TD_MANIFEST_ALIAS_MIN       10000u
#define TD_MANIFEST_ALIAS_MIN_BYTES (1u << 20)

/* td_manifest_opts.flags: refuse every alias, merge keys through an alias
 * included (text from a tenant: nothing it writes is worth expanding). */
#define TD_MANIFEST_NO_ALIASES 1u

typedef struct {
    unsigned flags; /* TD_MANIFEST_* */
} td_manifest_opts;

/* Parses buf (len bytes, need not be NUL-terminated) as a stream of YAML
 * documents; name is used in messages (copied). Empty documents are
 * skipped. Each document must be a mapping. TD_EINVAL with
 * "name:line:col: reason" on a syntax error, "name:line: excessive
 * aliasing: ..." past the alias budget, "name:line: aliases are not
 * accepted here" with TD_MANIFEST_NO_ALIASES, a duplicate key or an alias
 * to no anchor before it; nothing is returned then. o may be NULL (no
 * flags). */
td_status td_manifest_parse_opts(const char *name, const char *buf, size_t len,
                                 const td_manifest_opts *o, td_manifest **out, td_err *err);

/* td_manifest_parse_opts with no flags. */
td_status td_manifest_parse(const char *name, const char *buf, size_t len, td_manifest **out,
                            td_err *err);

/* JSON values m's documents were made of, and in *from_aliases (if not
 * NULL) how many of them aliases added. */
size_t td_manifest_nodes(const td_manifest *m, size_t *from_aliases);

/* Reads path ("-" for standard input) and parses it. TD_EIO if it cannot be
 * read, naming the path and the reason. */
td_status td_manifest_load_file(const char *path, td_manifest **out, td_err *err);

void td_manifest_destroy(td_manifest *m);

size_t td_manifest_count(const td_manifest *m);

/* The i-th document; borrowed, valid until the manifest is destroyed. */
json_t *td_manifest_doc(const td_manifest *m, size_t i);

const char *td_manifest_name(const td_manifest *m);

/* The 1-based source line of a node of one of m's documents, or 0 if not
 * known (e.g. a node added after parsing). m may be NULL. */
int td_manifest_line(const td_manifest *m, const json_t *node);

/* Formats "name:line: " + fmt into err for node (or "name: " if the line is
 * unknown) and returns s. m may be NULL (no prefix then). */
td_status td_manifest_err(const td_manifest *m, const json_t *node, td_err *err, td_status s,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Writes v as a block-style YAML document to f, the way kubectl prints
 * objects: strings plain where YAML reads them back as the same string,
 * double-quoted otherwise. Returns 0, or -1 on a write error. */
int td_yaml_write(const json_t *v, FILE *f);

#endif
