import sys, json
def load(f):
    r={}
    for l in open(f):
        l=l.rstrip('\n')
        k,_,rest=l.partition(' ')
        if k in ('DONE',''): continue
        if k.endswith('-track') or k.endswith('-batch'):
            o=json.loads(rest); k=k+'-'+str(o.get('frame')); r[k]=rest; continue
        r[k]=rest
    return r
a=load(sys.argv[1]); b=load(sys.argv[2])
nd=0; nsame=0
for k in b:
    if k not in a: continue
    if a[k]!=b[k]:
        nd+=1
        try:
            x=json.loads(a[k].split(' ',1)[1].rsplit('}',1)[0]+'}') if a[k].startswith('rc=') else json.loads(a[k])
            y=json.loads(b[k].split(' ',1)[1].rsplit('}',1)[0]+'}') if b[k].startswith('rc=') else json.loads(b[k])
            diff=[f for f in set(x)|set(y) if x.get(f)!=y.get(f)]
            print('DIFF',k,sorted(diff), 'it', x.get('iterations'), y.get('iterations'))
        except Exception as e:
            print('DIFF',k,a[k][:80],'|',b[k][:80])
    else: nsame+=1
print('same',nsame,'diff',nd,'missing',len([k for k in b if k not in a]))
