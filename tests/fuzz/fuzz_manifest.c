/* fuzz_manifest.c - libFuzzer target for the configuration loader: any
 * bytes as a YAML manifest, every document through validation into a
 * snapshot, then written back as YAML and read again. Nothing may crash or
 * leak; a failure must leave a message. The corpus holds alias bombs
 * (alias-bomb-*): on libfyaml's own expansion they took seconds and
 * gigabytes, past the replay's -timeout and -rss_limit_mb. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds/builtin.h"
#include "core/config.h"
#include "core/kind.h"
#include "core/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    td_manifest *m = NULL;
    td_err err;
    if (td_kinds_register_builtin(&err) != TD_OK)
        abort();
    err.msg[0] = '\0';
    /* Without aliases a text reads the same as with them allowed, or is
     * refused (an alias bomb: within the budget, or refused, in bounded
     * time and memory). */
    td_manifest_opts strict = {TD_MANIFEST_NO_ALIASES};
    td_manifest *plain = NULL;
    td_status pst =
        td_manifest_parse_opts("fuzz.yaml", (const char *)data, size, &strict, &plain, &err);
    assert(pst == TD_OK || err.msg[0] != '\0');
    err.msg[0] = '\0';
    if (td_manifest_parse("fuzz.yaml", (const char *)data, size, &m, &err) != TD_OK) {
        assert(err.msg[0] != '\0');
        assert(pst != TD_OK);
        return 0;
    }
    if (pst == TD_OK) {
        size_t copied = 1;
        assert(td_manifest_count(plain) == td_manifest_count(m));
        for (size_t i = 0; i < td_manifest_count(m); i++)
            assert(json_equal(td_manifest_doc(plain, i), td_manifest_doc(m, i)));
        assert(td_manifest_nodes(plain, &copied) == td_manifest_nodes(m, NULL) && copied == 0);
    }
    td_manifest_destroy(plain);
    td_config_builder *b = NULL;
    td_config *c = NULL;
    if (td_config_builder_create(NULL, &b, &err) == TD_OK) {
        if (td_config_builder_add_manifest(b, m, &err) == TD_OK &&
            td_config_builder_finish(b, &c, &err) == TD_OK) {
            json_t *const *all;
            size_t n = td_config_all(c, &all);
            for (size_t i = 0; i < n; i++)
                (void)td_config_tenant_for_namespace(c, td_json_str(all[i], "metadata.namespace"));
        }
        td_config_builder_destroy(b);
    }
    td_config_unref(c);
    /* Written YAML must read back as the same documents. */
    for (size_t i = 0; i < td_manifest_count(m); i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
            break;
        int rc = td_yaml_write(td_manifest_doc(m, i), f);
        fclose(f);
        if (rc == 0) {
            td_manifest *back = NULL;
            if (td_manifest_parse("back.yaml", buf, len, &back, &err) == TD_OK) {
                assert(td_manifest_count(back) == 1);
                assert(json_equal(td_manifest_doc(back, 0), td_manifest_doc(m, i)));
            }
            td_manifest_destroy(back);
        }
        free(buf);
    }
    td_manifest_destroy(m);
    return 0;
}
