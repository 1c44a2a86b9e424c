/* fuzz_manifest.c - libFuzzer target for the configuration loader: any
 * bytes as a YAML manifest, every document through validation into a
 * snapshot, then written back as YAML and read again. Nothing may crash or
 * leak; a failure must leave a message. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenantd/config.h"
#include "tenantd/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    td_manifest *m = NULL;
    td_err err;
    err.msg[0] = '\0';
    if (td_manifest_parse("fuzz.yaml", (const char *)data, size, &m, &err) != TD_OK) {
        assert(err.msg[0] != '\0');
        return 0;
    }
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
