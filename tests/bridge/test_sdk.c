/* The official OpenAI SDK for Node (npm package `openai`, pinned) against the
 * real tokenwired + tokenwire-bridge: sdk/openai_sdk.mjs does the checks,
 * this program installs the SDK into the build tree when it is missing,
 * starts the daemons and runs the script.
 *
 * Arguments: the model to serve, the script. Prints a SKIPPED line and
 * passes when node/npm are absent or the package cannot be installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bridge_fixture.h"

#define OPENAI_NODE_VERSION "5.23.2"

static const char *model_path, *script_path;
static char sdk_entry[1200];

static bool have_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The SDK's entry module, installed when missing; false (with the reason
 * printed) when it cannot be had. */
static bool ensure_sdk(void)
{
    char prefix[1100];
    twb_build_path(prefix, sizeof prefix, "node-openai");
    snprintf(sdk_entry, sizeof sdk_entry, "%s/node_modules/openai/index.mjs", prefix);
    if (system("command -v node >/dev/null 2>&1") != 0) {
        printf("SKIPPED (node not found)\n");
        return false;
    }
    if (have_file(sdk_entry))
        return true;
    if (system("command -v npm >/dev/null 2>&1") != 0) {
        printf("SKIPPED (npm not found)\n");
        return false;
    }
    char cmd[1500];
    snprintf(cmd, sizeof cmd,
             "timeout 300 npm install --prefix '%s' --no-audit --no-fund --no-save "
             "--loglevel=error openai@" OPENAI_NODE_VERSION " >'%s.log' 2>&1",
             prefix, prefix);
    int rc = system(cmd);
    if (rc != 0 || !have_file(sdk_entry)) {
        printf("SKIPPED (npm install openai@" OPENAI_NODE_VERSION " failed, status %d; see "
               "%s.log)\n",
               rc, prefix);
        return false;
    }
    return true;
}

static void test_openai_node_sdk(void **state)
{
    (void)state;
    twb_service s;
    twb_start(&s, model_path, NULL, "sk-sdk-test", NULL);

    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "OPENAI_SDK='%s' TW_BRIDGE_URL='http://127.0.0.1:%d/v1' TW_BRIDGE_KEY='%s' "
             "TW_MODEL='tokenwire-coder-24m-q8_0' timeout 150 node '%s'",
             sdk_entry, s.http, s.key, script_path);
    fflush(stdout);
    int rc = system(cmd);
    if (rc != 0)
        fail_msg("the SDK checks failed (status %d)", rc);
    twb_stop(&s);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL SCRIPT\n", argv[0]);
        return 2;
    }
    model_path = argv[1];
    script_path = argv[2];
    if (!twb_daemons_built())
        return 0;
    if (!ensure_sdk())
        return 0;
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_openai_node_sdk, twb_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
