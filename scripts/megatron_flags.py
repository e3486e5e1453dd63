#!/usr/bin/env python3
"""Writes strategies/plan/megatron_flags.cpp: every flag Megatron-LM's pretraining argument
parser (megatron/training/arguments.py, get_args_parser) defines, with how many values each
takes. Flags come from its literal add_argument calls and from the dataclass groups it builds
with ArgumentGroupFactory (megatron/training/argument_utils.py: a bool field defaulting to
False is a store_true --name, one defaulting otherwise --no-name/--disable-name, a list[...]
field takes nargs '+', argparse_meta overrides).

usage: scripts/megatron_flags.py MEGATRON_LM_GIT_DIR \
         | clang-format --assume-filename=x.cpp > strategies/plan/megatron_flags.cpp
"""
import ast, subprocess, sys, json
REPO=sys.argv[1]
def show(p): return subprocess.run(['git','-C',REPO,'show','HEAD:'+p],capture_output=True,text=True,check=True).stdout
args_src=show('megatron/training/arguments.py')
tree=ast.parse(args_src)
flags={}  # name -> kind
def put(names, kind):
    for n in names:
        if n.startswith('--'): flags.setdefault(n, kind)
def kw(call,name):
    for k in call.keywords:
        if k.arg==name: return k.value
    return None
def const(v):
    try: return ast.literal_eval(v)
    except Exception: return None
for node in ast.walk(tree):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr=='add_argument':
        names=[const(a) for a in node.args if isinstance(const(a),str)]
        action=const(kw(node,'action')) if kw(node,'action') is not None else None
        nargs=const(kw(node,'nargs')) if kw(node,'nargs') is not None else None
        if action in ('store_true','store_false','store_const','count','help'): kind='flag'
        elif nargs in ('+','*') or isinstance(nargs,int) and nargs>1: kind='list'
        elif nargs=='?': kind='optional'
        else: kind='value'
        put(names, kind)
# factories
classes={'TransformerConfig':'megatron/core/transformer/transformer_config.py','ModelParallelConfig':'megatron/core/model_parallel_config.py',
'StragglerDetectionConfig':'megatron/training/config/resilience_config.py','LoggerConfig':'megatron/training/config/training_config.py',
'ProfilingConfig':'megatron/training/config/common_config.py','TrainingConfig':'megatron/training/config/training_config.py',
'RerunStateMachineConfig':'megatron/training/config/resilience_config.py','RNGConfig':'megatron/training/config/common_config.py',
'SchedulerConfig':'megatron/training/config/training_config.py','CheckpointConfig':'megatron/training/config/training_config.py',
'DistributedInitConfig':'megatron/training/config/common_config.py','ValidationConfig':'megatron/training/config/training_config.py',
'TokenizerConfig':'megatron/training/config/training_config.py','FaultInjectorConfig':'megatron/core/fault_injector.py'}
def classdef(name):
    t=ast.parse(show(classes[name]))
    for n in t.body:
        if isinstance(n,ast.ClassDef) and n.name==name: return n
    raise SystemExit('no '+name)
def fields_of(name):
    c=classdef(name); out=[]
    for b in c.bases:
        if isinstance(b,ast.Name) and b.id in classes: out+=fields_of(b.id)
    for s in c.body:
        if isinstance(s,ast.AnnAssign) and isinstance(s.target,ast.Name):
            ann=ast.unparse(s.annotation)
            if 'ClassVar' in ann: continue
            default=None; meta=None; init=True; has_default=s.value is not None
            v=s.value
            if isinstance(v,ast.Call) and ast.unparse(v.func) in ('field','dataclasses.field'):
                d=kw(v,'default'); default=const(d) if d is not None else None
                i=kw(v,'init'); init = const(i) if i is not None else True
                m=kw(v,'metadata')
                if isinstance(m,ast.Dict):
                    for k,val in zip(m.keys,m.values):
                        if const(k)=='argparse_meta' and isinstance(val,ast.Dict):
                            meta={const(kk):vv for kk,vv in zip(val.keys,val.values)}
            elif v is not None: default=const(v)
            out=[f for f in out if f[0]!=s.target.id]
            out.append((s.target.id,ann,default,meta,init))
    return out
def fname(n,prefix=None):
    if prefix: n=prefix+'_'+n
    return '--'+n.replace('_','-')
factory_calls=[]
for node in ast.walk(tree):
    if isinstance(node,ast.Call) and isinstance(node.func,ast.Name) and node.func.id=='ArgumentGroupFactory':
        cls=node.args[0].id; ex=kw(node,'exclude'); exl=set()
        if ex is not None:
            if isinstance(ex,ast.Name):  # local variable 'exclude'
                # find assignment in enclosing function: take the literal list named exclude
                for n2 in ast.walk(tree):
                    if isinstance(n2,ast.Assign) and isinstance(n2.targets[0],ast.Name) and n2.targets[0].id==ex.id:
                        exl|=set(const(n2.value) or [])
            else: exl=set(const(ex))
        factory_calls.append((cls,exl))
for cls,exl in factory_calls:
    for (n,ann,default,meta,init) in fields_of(cls):
        if n in exl or init is False: continue
        names=[fname(n)]
        base=ann.replace('Optional[','').replace(' | None','').rstrip(']') if ann.startswith('Optional[') else ann.replace(' | None','')
        if base=='bool':
            if default is False: kind='flag'
            else: kind='flag'; names=[fname(n,'no'),fname(n,'disable')]
        elif base.startswith('list[') or base.startswith('List['): kind='list'
        else: kind='value'
        if meta:
            if 'arg_names' in meta: names=const(meta['arg_names']) or names
            if 'action' in meta:
                a=const(meta['action'])
                if a in ('store_true','store_false','store_const'): kind='flag'
            if 'nargs' in meta:
                na=const(meta['nargs'])
                kind='list' if na in ('+','*') else ('optional' if na=='?' else kind)
            if 'type' in meta and kind=='flag' and 'action' not in meta: kind='value'
        put(names,kind)
commit=subprocess.run(['git','-C',REPO,'rev-parse','HEAD'],capture_output=True,text=True,check=True).stdout.strip()
def table(name, kinds):
    # One space-separated literal, packed into lines of at most 100 columns.
    names=sorted(n for n,k in flags.items() if k in kinds)
    lines=[]; cur=''
    for n in names:
        if cur and len(cur)+len(n)+1 > 92:
            lines.append(cur); cur=''
        cur += n + ' '
    lines.append(cur)
    body='\n'.join('    "%s"' % l for l in lines)
    return '// clang-format off\nconstexpr std::string_view %s =\n%s;\n// clang-format on\n' % (name, body)
print(f"""// Generated by scripts/megatron_flags.py from NVIDIA/Megatron-LM at commit {commit}:
// every flag megatron/training/arguments.py (get_args_parser) defines, its own add_argument
// calls and the ArgumentGroupFactory dataclass groups (TransformerConfig, TrainingConfig,
// LoggerConfig, CheckpointConfig, ...). Regenerate; do not edit by hand.
#include "strategies/plan/megatron_flags.hpp"

#include <algorithm>

namespace loom::strategies {{
namespace {{

// Sorted, for binary search.
""")
print(table('SWITCHES', ('flag',)))
print(table('VALUES', ('value', 'optional')))
print(table('LISTS', ('list',)))
print(f"""// The names of `text`, sorted (each table is sorted already).
std::vector<std::string_view> words(std::string_view text) {{
  std::vector<std::string_view> out;
  for (size_t i = 0; i < text.size();) {{
    const size_t end = text.find(' ', i);
    out.push_back(text.substr(i, end - i));
    i = end + 1;
  }}
  return out;
}}

// Whether `flag` is in table `which` (0 switches, 1 values, 2 lists).
bool holds(int which, std::string_view flag) {{
  static const std::vector<std::string_view> tables[3] = {{words(SWITCHES), words(VALUES),
                                                          words(LISTS)}};
  const auto& names = tables[which];
  return std::binary_search(names.begin(), names.end(), flag);
}}

}}  // namespace

std::string_view megatron_lm_commit() {{ return "{commit}"; }}

std::optional<MegatronArity> megatron_flag_arity(std::string_view flag) {{
  if (holds(0, flag)) return MegatronArity::SWITCH;
  if (holds(1, flag)) return MegatronArity::VALUE;
  if (holds(2, flag)) return MegatronArity::LIST;
  return std::nullopt;
}}

std::vector<std::string> megatron_flag_names() {{
  std::vector<std::string> names;
  for (std::string_view table : {{SWITCHES, VALUES, LISTS}})
    for (std::string_view name : words(table)) names.emplace_back(name);
  return names;
}}

}}  // namespace loom::strategies""")
